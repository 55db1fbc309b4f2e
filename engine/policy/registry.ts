/**
 * @module engine/policy/registry
 * Builds the active policy from its configuration (`scripted`, `script`, `drift`, `solver`,
 * `solver-subagent`); drift wraps
 * the script policy when a script is loaded, the scripted agent otherwise.
 */

import type { Qwen3 } from '../qwen3.ts'
import { createDriftPolicy } from './drift.ts'
import type { Policy } from './policy.ts'
import { createScriptPolicy, type ScriptTurn } from './script.ts'
import { createScriptedPolicy } from './scripted.ts'
import { createSolverPolicy } from './solver.ts'

export const POLICY_NAMES = ['scripted', 'script', 'drift', 'solver', 'solver-subagent'] as const
export type PolicyName = (typeof POLICY_NAMES)[number]

export interface PolicyConfig {
  policy: PolicyName
  script: ScriptTurn[] | null
  /** Share of eligible tokens split in drift mode. */
  driftRate?: number | undefined
}

export function isPolicyName(value: unknown): value is PolicyName {
  return typeof value === 'string' && (POLICY_NAMES as readonly string[]).includes(value)
}

export function buildPolicy(config: PolicyConfig, qwen3: Qwen3): Policy {
  switch (config.policy) {
    case 'scripted':
      return createScriptedPolicy()
    case 'script':
      if (config.script === null) throw new Error("policy 'script' needs a script (--script <file.json>)")
      return createScriptPolicy(config.script)
    case 'solver':
      return createSolverPolicy({ delegate: false })
    case 'solver-subagent':
      return createSolverPolicy({ delegate: true })
    case 'drift': {
      const inner = config.script === null ? createScriptedPolicy() : createScriptPolicy(config.script)
      return createDriftPolicy(inner, qwen3, { rate: config.driftRate })
    }
  }
}
