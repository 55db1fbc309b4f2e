/**
 * One JSON nesting limit for every body at the edge (security issue, item 2): a 400 in the caller's own
 * wire shape naming the limit, on every route family, for bodies nested just past the limit and
 * 100,000 levels deep; exactly at the limit still passes.
 */
import { SELF } from 'cloudflare:test'
import { describe, expect, it } from 'vitest'
import { MAX_JSON_DEPTH } from '../../src/normalize/json-depth.ts'
import { TestRunner } from './rollout-support.ts'

const ADMIN = { authorization: 'Bearer test-admin-token', 'content-type': 'application/json' }
const EDGE = 'https://edge.test'
const LIMIT_TEXT = `limit of ${MAX_JSON_DEPTH} levels`

/** A JSON value nesting `levels` containers (objects and arrays alternating), as text. */
function deep(levels: number): string {
  let open = ''
  let close = ''
  for (let i = 0; i < levels; i++) {
    if (i % 2 === 0) {
      open += '{"a":'
      close = `}${close}`
    } else {
      open += '['
      close = `]${close}`
    }
  }
  return `${open}1${close}`
}

/** `body` as JSON text with the string "__DEEP__" replaced by a value nesting `levels` containers. */
function withDeep(body: unknown, levels: number): string {
  return JSON.stringify(body).replace('"__DEEP__"', deep(levels))
}

async function token(): Promise<string> {
  const res = await SELF.fetch(`${EDGE}/v1/sessions`, { method: 'POST', headers: ADMIN, body: '{}' })
  return ((await res.json()) as { token: string }).token
}

type Shape = 'openai' | 'anthropic' | 'google'

async function expectLimitError(res: Response, shape: Shape): Promise<void> {
  expect(res.status).toBe(400)
  const body = (await res.json()) as Record<string, Record<string, unknown>>
  if (shape === 'openai') {
    expect(body.error).toMatchObject({ type: 'invalid_request_error' })
  } else if (shape === 'anthropic') {
    expect(body).toMatchObject({ type: 'error', error: { type: 'invalid_request_error' } })
  } else {
    expect(body.error).toMatchObject({ code: 400, status: 'INVALID_ARGUMENT' })
  }
  expect(body.error?.message).toContain(LIMIT_TEXT)
}

interface Family {
  name: string
  shape: Shape
  send(levels: number): Promise<Response>
}

const families: Family[] = [
  {
    name: 'chat completions (tool parameters)',
    shape: 'openai',
    send: async (levels) =>
      SELF.fetch(`${EDGE}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${await token()}`, 'content-type': 'application/json' },
        body: withDeep(
          {
            model: 'm',
            messages: [{ role: 'user', content: 'hi' }],
            tools: [{ type: 'function', function: { name: 'f', parameters: '__DEEP__' } }],
          },
          levels,
        ),
      }),
  },
  {
    name: 'chat completions (unknown field)',
    shape: 'openai',
    send: async (levels) =>
      SELF.fetch(`${EDGE}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${await token()}`, 'content-type': 'application/json' },
        body: withDeep({ model: 'm', messages: [{ role: 'user', content: 'hi' }], vendor_extension: '__DEEP__' }, levels),
      }),
  },
  {
    name: 'Responses (tool parameters)',
    shape: 'openai',
    send: async (levels) =>
      SELF.fetch(`${EDGE}/v1/responses`, {
        method: 'POST',
        headers: { authorization: `Bearer ${await token()}`, 'content-type': 'application/json' },
        body: withDeep({ model: 'm', input: 'hi', tools: [{ type: 'function', name: 'f', parameters: '__DEEP__' }] }, levels),
      }),
  },
  {
    name: 'Anthropic messages (input_schema)',
    shape: 'anthropic',
    send: async (levels) =>
      SELF.fetch(`${EDGE}/v1/messages`, {
        method: 'POST',
        headers: { 'x-api-key': await token(), 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
        body: withDeep(
          { model: 'm', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }], tools: [{ name: 'f', input_schema: '__DEEP__' }] },
          levels,
        ),
      }),
  },
  {
    name: 'Anthropic count_tokens',
    shape: 'anthropic',
    send: async (levels) =>
      SELF.fetch(`${EDGE}/v1/messages/count_tokens`, {
        method: 'POST',
        headers: { 'x-api-key': await token(), 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
        body: withDeep(
          { model: 'm', messages: [{ role: 'user', content: 'hi' }], tools: [{ name: 'f', input_schema: '__DEEP__' }] },
          levels,
        ),
      }),
  },
  {
    name: 'Gemini generateContent (properties)',
    shape: 'google',
    send: async (levels) =>
      SELF.fetch(`${EDGE}/v1beta/models/gemini-x:generateContent`, {
        method: 'POST',
        headers: { 'x-goog-api-key': await token(), 'content-type': 'application/json' },
        body: withDeep(
          {
            contents: [{ role: 'user', parts: [{ text: 'hi' }] }],
            tools: [{ functionDeclarations: [{ name: 'f', parameters: { type: 'OBJECT', properties: '__DEEP__' } }] }],
          },
          levels,
        ),
      }),
  },
  {
    name: 'POST /v1/sessions (metadata)',
    shape: 'openai',
    send: (levels) =>
      SELF.fetch(`${EDGE}/v1/sessions`, { method: 'POST', headers: ADMIN, body: withDeep({ metadata: { x: '__DEEP__' } }, levels) }),
  },
  {
    name: 'task submit (metadata)',
    shape: 'openai',
    send: (levels) =>
      SELF.fetch(`${EDGE}/rollout/task/submit`, {
        method: 'POST',
        headers: ADMIN,
        body: withDeep({ task_id: 'deep-task', instruction: 'x', agent: { harness: 'qwen_code' }, metadata: { x: '__DEEP__' } }, levels),
      }),
  },
]

describe('JSON nesting limit', () => {
  for (const family of families) {
    it(`${family.name}: 400 in the caller's shape past the limit and at 100,000 levels`, async () => {
      await expectLimitError(await family.send(MAX_JSON_DEPTH + 1), family.shape)
      await expectLimitError(await family.send(100_000), family.shape)
    })
  }

  it('accepts a body nested exactly to the limit (top-level object = level 1)', async () => {
    // {metadata: {x: <deep>}}: the deep value's outermost container is level 3.
    const sessions = families.find((family) => family.name.startsWith('POST /v1/sessions'))!
    const atLimit = await sessions.send(MAX_JSON_DEPTH - 2)
    expect(atLimit.status).toBe(201)
    const past = await sessions.send(MAX_JSON_DEPTH - 1)
    await expectLimitError(past, 'openai')
  })

  it('holds runner messages to the same limit (an error frame, the message is not acted on)', async () => {
    const runner = await TestRunner.start('deep-runner')
    runner.ws.send(
      withDeep({ type: 'session.finished', session_id: 'ses_x', eval_result: { outcome_reward: 1, metadata: { x: '__DEEP__' } } }, 100_000),
    )
    expect((await runner.next('error')).message).toContain(LIMIT_TEXT)
    runner.close()
  })
})
