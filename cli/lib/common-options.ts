/**
 * @module
 * Options every edge-talking `rollgate` command shares: `--edge` / `ROLLGATE_EDGE_URL`,
 * `--admin-token` / `ROLLGATE_ADMIN_TOKEN`, `--json`; and one way to print results and fail.
 */
import { type Command, InvalidArgumentError, Option } from 'commander'
import { EdgeClient, EdgeError } from './edge-client.ts'

export interface CommonOptions {
  edge: string
  adminToken: string
  json: boolean
}

export const DEFAULT_EDGE_URL = 'http://127.0.0.1:8787'
export const DEFAULT_ADMIN_TOKEN = 'dev-admin-token'

/**
 * `--edge` / `ROLLGATE_EDGE_URL` as typed: an http(s) URL, and the edge's own base URL, not a harness's
 * (`<edge>/v1`). Before, `127.0.0.1:8787` was reported as an unreachable edge and `…/v1` as a 404 on an
 * admin route, both exit 3 with no word of the URL being the problem.
 */
export function parseEdgeUrl(value: string): string {
  let url: URL
  try {
    url = new URL(value)
  } catch {
    throw new InvalidArgumentError(`Not a URL: give the edge's base URL with its scheme, e.g. ${DEFAULT_EDGE_URL}`)
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new InvalidArgumentError(`Not an http(s) URL: give the edge's base URL, e.g. ${DEFAULT_EDGE_URL}`)
  const suffix = /\/(v1|v1beta)\/*$/.exec(url.pathname)?.[1]
  if (suffix)
    throw new InvalidArgumentError(
      `It ends in /${suffix}, as a harness's base URL does: give the edge's own, without /${suffix} (e.g. ${url.origin})`,
    )
  return value.replace(/\/+$/, '')
}

/** Add `--edge`, `--admin-token`, `--json` to a command. */
export function withEdgeOptions(command: Command): Command {
  return command
    .addOption(new Option('--edge <url>', 'edge base URL').env('ROLLGATE_EDGE_URL').default(DEFAULT_EDGE_URL).argParser(parseEdgeUrl))
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
        process.stderr.write(`rollgate: ${error.message}${nextStep(error)}\n`)
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

/** What to do about an edge error a new user meets first (an unreachable edge, a wrong admin token), on its own line. */
function nextStep(error: EdgeError): string {
  if (error.status === 0)
    return `\n  is the edge running? \`npm run dev:stack\` starts one on ${DEFAULT_EDGE_URL}; another edge: --edge <url> or ROLLGATE_EDGE_URL`
  if (error.status === 401 && /admin token/.test(error.message))
    return `\n  pass the edge's ROLLGATE_ADMIN_TOKEN with --admin-token or ROLLGATE_ADMIN_TOKEN (npm run dev / dev:stack: ${DEFAULT_ADMIN_TOKEN} unless ROLLGATE_ADMIN_TOKEN was set)`
  if (error.status === 404 && /\/rollout\/runners\//.test(error.message))
    return '\n  `rollgate runners list` shows the runner ids this edge knows'
  return ''
}
