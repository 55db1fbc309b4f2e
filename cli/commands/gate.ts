/**
 * @module
 * `rollgate pause` / `rollgate resume`: the generation gate (weight updates between policy versions).
 * `pause` waits for in-flight generations to drain (exit 1 when they did not within `--timeout`).
 */
import type { Command } from 'commander'
import { action, type CommonOptions, EXIT, edgeClient, output, UsageError, withEdgeOptions } from '../lib/common-options.ts'
import { EdgeError, type GateStatus } from '../lib/edge-client.ts'

interface GateOptions extends CommonOptions {
  policyVersion?: string
  timeout: string
}

/** `--timeout` as the edge reads `timeout_seconds`: a number of seconds in [0, 3600], checked before any call. */
export function drainTimeoutSeconds(timeout: string): number {
  if (!/^(0|[1-9][0-9]*)(\.[0-9]+)?$/.test(timeout) || Number(timeout) > 3600) {
    throw new UsageError(`--timeout must be a number of seconds in [0, 3600], got "${timeout}"`)
  }
  return Number(timeout)
}

function describe(status: GateStatus): string {
  return `inference ${status.paused ? 'paused' : 'open'}; ${status.inflight} in flight; policy version ${status.policy_version ?? '—'}`
}

export function register(program: Command): void {
  withEdgeOptions(
    program
      .command('pause')
      .description('pause generation (drains in-flight calls)')
      .option('--policy-version <v>', 'policy version to record')
      .option('--timeout <seconds>', 'drain timeout', '60'),
  ).action(
    action(async (options: GateOptions) => {
      try {
        const timeout = drainTimeoutSeconds(options.timeout)
        const status = await edgeClient(options).pause(timeout, options.policyVersion)
        output(options, status, () => describe(status))
        return EXIT.ok
      } catch (error) {
        if (error instanceof EdgeError && error.status === 504) {
          output(options, { paused: true, drained: false, message: error.message }, () => error.message)
          return EXIT.failed
        }
        throw error
      }
    }),
  )
  withEdgeOptions(
    program.command('resume').description('resume generation').option('--policy-version <v>', 'new policy version to record'),
  ).action(
    action(async (options: GateOptions) => {
      const status = await edgeClient(options).resume(options.policyVersion)
      output(options, status, () => describe(status))
      return EXIT.ok
    }),
  )
}
