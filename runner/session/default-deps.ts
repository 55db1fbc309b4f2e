/**
 * @module
 * Production wiring of the session flow: the runtime registry (`runner/runtime/index.ts`), the harness
 * registry (`runner/harness/index.ts`) and the evaluator registry (`runner/evaluators/index.ts`). The edge runs
 * `session_completed` itself, so it resolves to no runner-side evaluator.
 */
import type { EvaluatorSpec, RuntimeSpec } from '../../src/contract/rollout.ts'
import { EDGE_EVALUATORS } from '../../src/contract/rollout.ts'
import type { Evaluator } from '../evaluators/evaluator.ts'
import { getHarness } from '../harness/index.ts'
import type { Runtime, RuntimeContext } from '../runtime/runtime.ts'
import type { SessionFlowDeps } from './session-flow.ts'

export interface DefaultDepsOptions {
  workRoot: string
  edgeUrl: string
  model: string | null
  /** `--runtime`: backend of tasks that name none. */
  runtime: 'local' | 'docker' | 'apptainer'
  /** `--image`: image of tasks that name no runtime, for docker / apptainer. */
  image: string | null
}

export function defaultSessionDeps(options: DefaultDepsOptions): SessionFlowDeps {
  return {
    workRoot: options.workRoot,
    edgeUrl: options.edgeUrl,
    model: options.model,
    createRuntime: (_spec: RuntimeSpec | null, _context: RuntimeContext): Runtime => {
      throw new Error(`no runtime backends are installed in this runner yet (asked for ${options.runtime})`)
    },
    harness: getHarness,
    evaluator: (spec: EvaluatorSpec): Evaluator | null => {
      if ((EDGE_EVALUATORS as readonly string[]).includes(spec.strategy)) return null
      throw new Error(`evaluator ${spec.strategy} is not available on this runner`)
    },
  }
}
