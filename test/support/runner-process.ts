/**
 * @module
 * Entry for integration tests: the real runner agent (`rollgate runner`'s `runRunner`: connection, tunnel,
 * pools, session flow, status endpoint, signal handling) in its own process, with the host runtime of
 * `host-runtime.ts` instead of a sandbox backend. Options come as one JSON argument (`RunnerCommandOptions`).
 */
import { runRunner, type RunnerCommandOptions } from '../../cli/commands/runner.ts'
import { getHarness } from '../../runner/harness/index.ts'
import type { StageHandlers } from '../../runner/pools/pipeline.ts'
import { SessionFlow, type SessionJob } from '../../runner/session/session-flow.ts'
import { HostRuntime } from './host-runtime.ts'

const options = JSON.parse(process.argv[2] ?? '{}') as RunnerCommandOptions
const flow = new SessionFlow({
  workRoot: options.workDir ?? `${options.stateDir}/sessions`,
  edgeUrl: options.edge,
  model: options.servedModel,
  createRuntime: (spec, context) => new HostRuntime(spec, context),
  harness: getHarness,
  evaluator: () => null,
})
const code = await runRunner(options, flow as unknown as StageHandlers<SessionJob, unknown>)
process.exit(code)
