/**
 * @module
 * R6 credentials: every token kind (admin, runner, session, another session's, forged, revoked after
 * finalize, none) on every route family (admin, rollout, runner connect, the four model APIs), through
 * each carrier. Only the right kind passes. Then no secret (admin token, runner token, signing key,
 * upstream key, session tokens, runner secret) may appear in any stored record, any file the edge
 * persisted (Durable Object SQLite, R2), any line the edge logged, or any error body.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { RunnerClient } from '../../test/support/runner-client.ts'
import { apiRequest } from './apis.ts'
import { emptyRow, type Scenario } from './scenario.ts'
import { ADMIN_TOKEN, createSession, RUNNER_TOKEN, records, SIGNING_KEY, startChaosStack, UPSTREAM_KEY } from './stack.ts'

type Kind = 'admin' | 'runner' | 'session' | 'foreign' | 'forged' | 'none'

function files(dir: string): string[] {
  const out: string[] = []
  for (const entry of readdirSync(dir)) {
    const path = join(dir, entry)
    if (statSync(path).isDirectory()) out.push(...files(path))
    else out.push(path)
  }
  return out
}

export const r6Credentials: Scenario = {
  id: 'R6',
  title: 'token kinds × route families; secrets scan of records, storage, logs, errors',
  async run({ log }) {
    const row = {
      ...emptyRow(),
      checks: 0,
      accepted_wrongly: 0,
      refused_wrongly: 0,
      secrets_found: 0,
      files_scanned: 0,
      finalized_token_status: 0,
    }
    const stack = await startChaosStack({ ROLLGATE_UPSTREAM_API_KEY: UPSTREAM_KEY })
    const runner = new RunnerClient({ edgeUrl: stack.edge.url, token: RUNNER_TOKEN, runnerId: 'r6-runner', engineUrl: null })
    const bodies: string[] = []
    try {
      const registered = await runner.start()
      const a = await createSession(stack)
      const b = await createSession(stack)
      const last = a.token.at(-1) === 'A' ? 'B' : 'A'
      const tokens: Record<Kind, string | null> = {
        admin: ADMIN_TOKEN,
        runner: RUNNER_TOKEN,
        session: a.token,
        foreign: b.token,
        forged: `${a.token.slice(0, -1)}${last}`,
        none: null,
      }
      // Route families and which kind each admits. `foreign` is a valid session token: it passes the model
      // APIs (for its own session) but must not pass anything else.
      const routes: { family: string; method: string; path: string; body?: string; admits: Kind[] }[] = [
        { family: 'admin', method: 'GET', path: '/rollout/status', admits: ['admin'] },
        { family: 'admin', method: 'GET', path: `/v1/sessions/${a.session_id}`, admits: ['admin'] },
        { family: 'admin', method: 'GET', path: `/v1/sessions/${a.session_id}/completions`, admits: ['admin'] },
        { family: 'admin', method: 'POST', path: '/v1/sessions', body: '{}', admits: ['admin'] },
        { family: 'admin', method: 'GET', path: '/admin/inference/status', admits: ['admin'] },
        { family: 'runner', method: 'GET', path: '/runners/connect?runner_id=r6-probe', admits: ['runner'] },
        ...(['openai-chat', 'anthropic', 'openai-responses', 'google'] as const).map((api) => {
          const { path, body } = apiRequest(api, false)
          return { family: `model:${api}`, method: 'POST', path, body: JSON.stringify(body), admits: ['session', 'foreign'] as Kind[] }
        }),
      ]
      const carriers: Record<string, (token: string) => { prefix: string; headers: Record<string, string>; query: string }> = {
        bearer: (token) => ({ prefix: '', headers: { authorization: `Bearer ${token}` }, query: '' }),
        'x-api-key': (token) => ({ prefix: '', headers: { 'x-api-key': token }, query: '' }),
        'x-goog-api-key': (token) => ({ prefix: '', headers: { 'x-goog-api-key': token }, query: '' }),
        '?key=': (token) => ({ prefix: '', headers: {}, query: `key=${encodeURIComponent(token)}` }),
        '/s/<token>': (token) => ({ prefix: `/s/${token}`, headers: {}, query: '' }),
      }
      const check = async (kind: Kind, carrier: string, route: (typeof routes)[number]) => {
        const token = tokens[kind]
        const how = token
          ? (carriers[carrier] as (t: string) => { prefix: string; headers: Record<string, string>; query: string })(token)
          : { prefix: '', headers: {}, query: '' }
        const separator = route.path.includes('?') ? '&' : '?'
        const url = `${stack.edge.url}${how.prefix}${route.path}${how.query ? `${separator}${how.query}` : ''}`
        const response = await fetch(url, {
          method: route.method,
          headers: { 'content-type': 'application/json', ...how.headers },
          ...(route.body ? { body: route.body } : {}),
          signal: AbortSignal.timeout(30_000),
        })
        const text = await response.text()
        bodies.push(text)
        row.sent++
        row.checks++
        // The runner route answers 426 to a plain GET that passed authentication (no upgrade).
        const passed = response.status < 400 || response.status === 426
        const shouldPass =
          route.admits.includes(kind) && (kind !== 'admin' || carrier === 'bearer') && (kind !== 'runner' || carrier === 'bearer')
        if (response.status >= 500 && response.headers.get('x-rollgate-error-source') !== 'upstream') row.edge_5xx++
        if (passed && !shouldPass) {
          row.accepted_wrongly++
          row.errors++
          row.notes.push(`${kind} via ${carrier} passed ${route.method} ${route.path} (${response.status})`)
        }
        if (!passed && shouldPass && route.family !== 'admin') {
          row.refused_wrongly++
          row.errors++
          row.notes.push(`${kind} via ${carrier} refused on ${route.method} ${route.path} (${response.status} ${text.slice(0, 80)})`)
        }
      }
      for (const route of routes) {
        for (const kind of Object.keys(tokens) as Kind[]) {
          for (const carrier of kind === 'none' ? ['bearer'] : Object.keys(carriers)) await check(kind, carrier, route)
        }
      }
      log(`${row.checks} credential checks`)
      // A finalized session's token stops working (revocation), when the edge revokes on finalize.
      const finalize = await stack.admin(`/v1/sessions/${b.session_id}/finalize`, { method: 'POST', body: '{}' })
      const afterFinalize = await fetch(`${stack.edge.url}/s/${b.token}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(apiRequest('openai-chat', false).body),
      })
      bodies.push(await afterFinalize.text())
      row.finalized_token_status = afterFinalize.status
      if (finalize.ok && afterFinalize.status < 400) {
        row.errors++
        row.notes.push('a finalized session still accepts model calls')
      }
      // Secrets scan.
      const secrets: Record<string, string> = {
        admin_token: ADMIN_TOKEN,
        runner_token: RUNNER_TOKEN,
        signing_key: SIGNING_KEY,
        upstream_key: UPSTREAM_KEY,
        session_token_a: a.token,
        session_token_b: b.token,
        ...(registered.runner_secret ? { runner_secret: registered.runner_secret } : {}),
      }
      const stored = JSON.stringify([...(await records(stack, a.session_id)), ...(await records(stack, b.session_id))])
      row.captured = (await records(stack, a.session_id)).length + (await records(stack, b.session_id)).length
      const persisted = files(stack.persistTo)
      row.files_scanned = persisted.length
      const haystacks: [string, string][] = [
        ['records', stored],
        ['edge log', stack.edgeOutput()],
        ['error bodies', bodies.join('\n')],
        ...persisted.map((path): [string, string] => [`file ${path.slice(stack.persistTo.length)}`, readFileSync(path).toString('latin1')]),
      ]
      for (const [where, text] of haystacks) {
        for (const [name, secret] of Object.entries(secrets)) {
          // The session token's signature part is the secret bit; the id part is public.
          const needle = name.startsWith('session_token') ? (secret.split('.').at(-1) as string) : secret
          const at = text.indexOf(needle)
          if (at >= 0) {
            row.secrets_found++
            row.errors++
            row.notes.push(
              `${name} found in ${where}: …${text.slice(Math.max(0, at - 60), at + needle.length + 20).replace(/[^\x20-\x7e]/g, '.')}…`,
            )
          }
        }
      }
      row.served = stack.engine.stats().requests.chat_completions ?? 0
      return row
    } finally {
      await runner.shutdown().catch(() => {})
      await stack.stop()
    }
  },
}
