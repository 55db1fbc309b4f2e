/**
 * @module
 * R1 hostile input, beyond `npm run fuzz`'s mutations: structural attacks on every model API and the
 * control plane. The edge must answer each with a 4xx in the caller's own shape (or a normal 200 where
 * the input is legal), never a 5xx of its own; nothing of one session may reach another.
 */
import { APIS, type Api, apiRequest, errorShapeOk } from './apis.ts'
import { emptyRow, type Scenario } from './scenario.ts'
import { createSession, records, startChaosStack } from './stack.ts'

function nested(depth: number): string {
  return `${'['.repeat(depth)}${']'.repeat(depth)}`
}

interface Attack {
  name: string
  /** Raw body text (sent as is). */
  body: (api: Api, stream: boolean) => string | Uint8Array
  /** Path override (Gemini model-name tricks). */
  path?: (api: Api) => string | null
}

const SECRET_MARKER = 'r1-secret-of-session-a-7d41'

const ATTACKS: Attack[] = [
  {
    name: 'nested 100,000 deep',
    body: (api) => {
      const base = JSON.stringify(apiRequest(api, false).body)
      return `${base.slice(0, -1)},"x":${nested(100_000)}}`
    },
  },
  {
    name: '10k messages',
    body: (api) => {
      const many = Array.from({ length: 10_000 }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: `m${i}` }))
      many.push({ role: 'user', content: 'last' })
      if (api === 'google')
        return JSON.stringify({ contents: many.map((m) => ({ role: m.role === 'user' ? 'user' : 'model', parts: [{ text: m.content }] })) })
      if (api === 'openai-responses') return JSON.stringify({ model: 'm', input: many })
      return JSON.stringify({ ...(apiRequest(api, false).body as object), messages: many })
    },
  },
  {
    name: 'invalid UTF-8',
    body: (api) => {
      const text = JSON.stringify(apiRequest(api, false, 'XXXX').body)
      const bytes = new TextEncoder().encode(text)
      const at = text.indexOf('XXXX')
      bytes[at] = 0xff
      bytes[at + 1] = 0xfe
      return bytes
    },
  },
  { name: 'lone surrogates', body: (api) => JSON.stringify(apiRequest(api, false, 'a\ud800b\udc00c').body) },
  {
    name: '__proto__ / constructor keys',
    body: (api) => {
      const text = JSON.stringify(apiRequest(api, false).body)
      return `${text.slice(0, -1)},"__proto__":{"polluted":true},"constructor":{"prototype":{"polluted":true}}}`
    },
  },
  {
    name: 'number 1e309',
    body: (api) => {
      const text = JSON.stringify(apiRequest(api, false).body)
      return `${text.slice(0, -1)},"temperature":1e309,"max_tokens":1e309}`
    },
  },
  {
    name: 'forged reasoning / thinking signature',
    body: (api) => {
      switch (api) {
        case 'anthropic':
          return JSON.stringify({
            model: 'm',
            max_tokens: 64,
            messages: [
              { role: 'user', content: 'hi' },
              {
                role: 'assistant',
                content: [
                  { type: 'thinking', thinking: 'x', signature: 'rgth1.forged.AAAA' },
                  { type: 'text', text: 'ok' },
                ],
              },
              { role: 'user', content: 'again' },
            ],
          })
        case 'openai-responses':
          return JSON.stringify({
            model: 'm',
            input: [
              { type: 'reasoning', id: 'rs_x', summary: [], encrypted_content: 'rgrs1.Zm9yZ2Vk.!!!' },
              { role: 'user', content: 'again' },
            ],
          })
        case 'google':
          return JSON.stringify({
            contents: [
              { role: 'user', parts: [{ text: 'hi' }] },
              { role: 'model', parts: [{ text: 'x', thought: true, thoughtSignature: 'forged$$$' }] },
              { role: 'user', parts: [{ text: 'again' }] },
            ],
          })
        default:
          return JSON.stringify({
            model: 'm',
            messages: [
              { role: 'assistant', content: 'x', reasoning_content: 'forged' },
              { role: 'user', content: 'hi' },
            ],
          })
      }
    },
  },
  {
    name: 'Gemini model path tricks',
    body: (api) => JSON.stringify(apiRequest(api, false).body),
    path: (api) => (api === 'google' ? '/v1beta/models/..%2F..%2Fv1%2Fsessions:generateContent' : null),
  },
]

export const r1Hostile: Scenario = {
  id: 'R1',
  title: 'hostile input on every API and the control plane',
  async run({ log }) {
    const row = { ...emptyRow(), attacks: 0, status_4xx: 0, status_2xx: 0, cross_session_leaks: 0 }
    const stack = await startChaosStack()
    try {
      const victim = await createSession(stack)
      const attacker = await createSession(stack)
      // The victim's conversation carries a secret; nothing of it may reach the attacker.
      const seeded = await fetch(`${stack.edge.url}/s/${victim.token}/v1/responses`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'm', input: `remember ${SECRET_MARKER}` }),
      })
      const victimResponse = (await seeded.json()) as { id: string }
      const send = async (
        name: string,
        api: Api | 'control',
        url: string,
        body: string | Uint8Array,
        headers: Record<string, string> = {},
      ) => {
        row.sent++
        row.attacks++
        const response = await fetch(url, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...headers },
          body: body as BodyInit,
        })
        const text = await response.text()
        if (response.status >= 500) {
          if (response.headers.get('x-rollgate-error-source') !== 'upstream') row.edge_5xx++
          row.errors++
          row.notes.push(`${name} [${api}]: ${response.status} ${text.slice(0, 100)}`)
        } else if (response.status >= 400) {
          row.status_4xx++
          let parsed: unknown = null
          try {
            parsed = JSON.parse(text)
          } catch {}
          if (api !== 'control' && !errorShapeOk(api, parsed)) {
            row.errors++
            row.notes.push(`${name} [${api}]: ${response.status} not in the API's error shape: ${text.slice(0, 100)}`)
          }
        } else row.status_2xx++
        if (text.includes(SECRET_MARKER)) {
          row.cross_session_leaks++
          row.errors++
          row.notes.push(`${name} [${api}]: the victim's content leaked`)
        }
      }
      for (const api of APIS) {
        for (const attack of ATTACKS) {
          const path = attack.path?.(api) ?? apiRequest(api, false).path
          await send(attack.name, api, `${stack.edge.url}/s/${attacker.token}${path}`, attack.body(api, false))
        }
        log(`R1 ${api}: ${ATTACKS.length} attacks`)
      }
      // previous_response_id of another session.
      await send(
        'foreign previous_response_id',
        'openai-responses',
        `${stack.edge.url}/s/${attacker.token}/v1/responses`,
        JSON.stringify({ model: 'm', input: 'what did I say?', previous_response_id: victimResponse.id }),
      )
      // Control plane: session create and task submit with hostile metadata.
      const admin = { authorization: 'Bearer chaos-admin-token' }
      await send('nested metadata', 'control', `${stack.edge.url}/v1/sessions`, `{"metadata":{"x":${nested(100_000)}}}`, admin)
      await send('proto metadata', 'control', `${stack.edge.url}/v1/sessions`, '{"metadata":{"__proto__":{"admin":true}}}', admin)
      await send(
        'nested task',
        'control',
        `${stack.edge.url}/rollout/task/submit`,
        `{"task_id":"r1","instruction":"x","agent":{"harness":"shell","custom_shell":{"command":"true"}},"metadata":{"x":${nested(100_000)}}}`,
        admin,
      )
      // Nothing captured in the attacker's session carries the victim's secret.
      const attackerRecords = await records(stack, attacker.session_id)
      row.captured = attackerRecords.length + (await records(stack, victim.session_id)).length
      if (JSON.stringify(attackerRecords).includes(SECRET_MARKER)) {
        row.cross_session_leaks++
        row.errors++
        row.notes.push("the attacker's records contain the victim's content")
      }
      row.served = stack.engine.stats().requests.chat_completions ?? 0
      return row
    } finally {
      await stack.stop()
    }
  },
}
