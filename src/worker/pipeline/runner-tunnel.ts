/**
 * @module
 * A `fetch`-compatible function that sends the upstream request to one runner's local engine
 * through that runner's own `RunnerLink` object (`src/durable/runner/tunnel.ts` frames it over the
 * runner's WebSocket); the runner hub is not on this path.
 * `callUpstream` uses it unchanged: same body, same abort signal (client gone, timeout), same
 * response handling. The URL's path and query are kept; its origin (`runner://<id>`) only names the runner.
 *
 * The hop is `stub.fetch` with the request streamed through, not a JS RPC call carrying the body as a value:
 * measured side by side in one `bench:tunnel` run, RPC cost workerd ~0.5 ms more CPU per call at 2 KB and at
 * 54 KB (serializing the body and the answer both ways), and latency followed. Tunnel failures come back as
 * JSON answers whose `error.code` names them (`TUNNEL_ERROR`, `src/durable/runner/tunnel.ts`), which the
 * pipeline relays in the caller's own format like any engine error.
 */
import { TUNNEL_TIMEOUT_HEADER } from '../../durable/runner/tunnel.ts'
import { linkStub } from './rollout-stubs.ts'

export function runnerTunnelFetch(env: Env, runnerId: string, timeoutMs: number): typeof fetch {
  const link = linkStub(env, runnerId)
  return async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const source = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url
    const url = new URL(source)
    const headers = new Headers(init?.headers)
    headers.set(TUNNEL_TIMEOUT_HEADER, String(timeoutMs))
    const target = `https://runner-link/tunnel/${encodeURIComponent(runnerId)}${url.pathname}${url.search}`
    return link.fetch(
      new Request(target, {
        method: init?.method ?? 'GET',
        headers,
        ...(init?.body === undefined || init.body === null ? {} : { body: init.body }),
        ...(init?.signal ? { signal: init.signal } : {}),
      }),
    )
  }
}
