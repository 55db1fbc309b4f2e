/**
 * @module
 * Options every edge-talking `rollgate` command shares: `--edge` / `ROLLGATE_EDGE_URL`,
 * `--admin-token` / `ROLLGATE_ADMIN_TOKEN`, `--json`; and one way to print results and fail.
 */
import { type Command, Option } from 'commander'
import { EdgeClient, EdgeError } from './edge-client.ts'

export interface CommonOptions {
  edge: string
  adminToken: string
  json: boolean
}

export const DEFAULT_EDGE_URL = 'http://127.0.0.1:8787'
export const DEFAULT_ADMIN_TOKEN = 'dev-admin-token'

/** Add `--edge`, `--admin-token`, `--json` to a command. */
export function withEdgeOptions(command: Command): Command {
  return command
    .addOption(new Option('--edge <url>', 'edge base URL').env('ROLLGATE_EDGE_URL').default(DEFAULT_EDGE_URL))
    .addOption(new Option('--admin-token <token>', 'admin bearer token').env('ROLLGATE_ADMIN_TOKEN').default(DEFAULT_ADMIN_TOKEN))
    .addOption(new Option('--json', 'machine-readable output (one JSON document on stdout)').default(false))
}

export function edgeClient(options: CommonOptions): EdgeClient {
  return new EdgeClient({ edge: options.edge, adminToken: options.adminToken })
}

/** Print a value: JSON with `--json`, else the human rendering. */
export function output(options: { json: boolean }, value: unknown, human: () => string): void {
  process.stdout.write(options.json ? `${JSON.stringify(value, null, 2)}\n` : `${human()}\n`)
}

/** Exit codes: 0 ok, 1 the outcome was a failure, 2 usage or input error, 3 the edge refused or is unreachable. */
export const EXIT = { ok: 0, failed: 1, usage: 2, edge: 3 } as const

/** Run a command body; an EdgeError or bad input ends the process with a one-line message and its exit code. */
export function action<A extends unknown[]>(body: (...args: A) => Promise<number | undefined>): (...args: A) => Promise<void> {
  return async (...args: A) => {
    try {
      process.exitCode = (await body(...args)) ?? EXIT.ok
    } catch (error) {
      if (error instanceof EdgeError) {
        process.stderr.write(`rollgate: ${error.message}\n`)
        process.exitCode =
          error.status >= 400 && error.status < 500 && error.status !== 401 && error.status !== 404 ? EXIT.usage : EXIT.edge
        return
      }
      if (error instanceof UsageError) {
        process.stderr.write(`rollgate: ${error.message}\n`)
        process.exitCode = EXIT.usage
        return
      }
      throw error
    }
  }
}

export class UsageError extends Error {}
