/**
 * @module
 * The evaluator contract (Polar §21): registry name or custom module path (`./path/to/module.ts:exportName`).
 * Runs on the runner in POSTRUN after the agent exits; its result reaches the edge with `session.finished`.
 */
import type { EvaluatorSpec } from '../../src/contract/rollout.ts'
import type { AgentResult } from '../../src/contract/runner-protocol.ts'
import type { EvalResult } from '../../src/contract/trajectory.ts'
import type { Runtime } from '../runtime/runtime.ts'

export interface EvaluationContext {
  sessionId: string
  taskId: string
  /** Host session dir (mounted at /polar/session in the runtime). */
  sessionDir: string
  artifactsDir: string
  agentResult: AgentResult
  spec: EvaluatorSpec
  /** Remaining session budget. */
  timeoutMs: number
  /** The session's live runtime. */
  runtime: Runtime
  /** A fresh runtime prepared in parallel (eval_prepare) when `spec.refresh_runtime`; null otherwise. */
  freshRuntime: Runtime | null
  signal: AbortSignal
}

export interface Evaluator {
  name: string
  /** Validate `spec.config` (throw a message naming the field); also used at submit time by the edge when possible. */
  validate?(config: Record<string, unknown>): void
  evaluate(context: EvaluationContext): Promise<EvalResult>
}
