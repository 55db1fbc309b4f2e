/**
 * @module
 * Production wiring of the session flow: the runtime registry (`runner/runtime/index.ts`), the harness
 * registry and per-host install cache (`runner/harness/`), and the evaluator registry (`runner/evaluators/`). The edge runs
 * `session_completed` itself, so it resolves to no runner-side evaluator.
 */
import type { EvaluatorSpec } from '../../src/contract/rollout.ts'
import { EDGE_EVALUATORS, type RuntimeBackend } from '../../src/contract/rollout.ts'
import type { Evaluator } from '../evaluators/evaluator.ts'
import { EVALUATORS, runEvaluation } from '../evaluators/index.ts'
import type { Harness } from '../harness/harness.ts'
import { getHarness } from '../harness/index.ts'
import { ensureHarnessInstalled } from '../harness/install.ts'
import { cliPath, harnessHostMounts } from '../harness/run.ts'
import { createRuntime } from '../runtime/index.ts'
import type { ReadOnlyBind } from '../runtime/runtime.ts'
import type { SessionFlowDeps } from './session-flow.ts'

export interface DefaultDepsOptions {
  workRoot: string
  edgeUrl: string
  model: string | null
  /** `--runtime`: backend of tasks that name none. */
  runtime: RuntimeBackend
  /** `--image`: image of tasks that name no runtime, for docker / apptainer. */
  image: string | null
  /** `--ro-bind`: host paths mounted read-only into every runtime (beside the harness CLI's own mounts). */
  readOnlyBinds?: ReadOnlyBind[]
  /** Parent of the local runtime's private per-session roots. */
  runtimeStateDir?: string
  log?(event: string, fields?: Record<string, unknown>): void
}

/**
 * Install (or find) a harness CLI once per host (`ensureHarnessInstalled`); every runtime mounts the harness
 * cache, the repo's `node_modules` and this Node's bin dir read-only at the same paths (`harnessHostMounts`).
 */
export async function hostHarnessCli(
  harness: Harness,
  log?: DefaultDepsOptions['log'],
): Promise<{ cliPath: string; readOnlyBinds: { source: string; target: string }[] } | null> {
  const readOnlyBinds = harnessHostMounts().map((dir) => ({ source: dir, target: dir }))
  if (!harness.pkg) return { cliPath: '', readOnlyBinds }
  const installed = await ensureHarnessInstalled(harness.pkg, { log: (line) => log?.('harness.install', { harness: harness.name, line }) })
  return { cliPath: installed.bin, readOnlyBinds }
}

/** Runner-side evaluator strategies this runner offers (reported at registration). */
export function runnerEvaluators(): string[] {
  return Object.keys(EVALUATORS).filter((name) => !(EDGE_EVALUATORS as readonly string[]).includes(name))
}

export function defaultSessionDeps(options: DefaultDepsOptions): SessionFlowDeps {
  return {
    workRoot: options.workRoot,
    edgeUrl: options.edgeUrl,
    model: options.model,
    createRuntime: (spec, context, extras) =>
      createRuntime(spec, context, {
        defaultBackend: options.runtime,
        defaultImage: options.image,
        // every backend: the harness CLI runs from the host cache whatever the runtime
        readOnlyBinds: [...(options.readOnlyBinds ?? []), ...(extras?.readOnlyBinds ?? [])],
        ...(options.runtimeStateDir ? { local: { stateDir: options.runtimeStateDir } } : {}),
      }),
    harness: getHarness,
    installHarness: (harness) => hostHarnessCli(harness, options.log),
    basePath: cliPath(),
    evaluator: (spec: EvaluatorSpec): Evaluator | null => {
      if ((EDGE_EVALUATORS as readonly string[]).includes(spec.strategy)) return null
      // runEvaluation resolves (registry or module path), validates and checks the result.
      return { name: spec.strategy, evaluate: (context) => runEvaluation(context) }
    },
  }
}
