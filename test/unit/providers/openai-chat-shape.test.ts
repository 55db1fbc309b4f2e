import { readdirSync } from 'node:fs'
import { join } from 'node:path'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { messagesLookValid, requestLooksValid, toolsLookValid } from '../../../src/normalize/providers/openai-chat/openai-chat-shape.ts'
import {
  openaiChatMessageSchema,
  openaiChatRequestSchema,
  openaiChatToolSchema,
} from '../../../src/normalize/providers/openai-chat/openai-chat-wire.ts'
import { openaiChat } from '../../../src/normalize/providers/openai-chat/index.ts'
import { z } from 'zod'
import { fixture } from './fixtures.ts'

const NAMES = readdirSync(join(import.meta.dirname, '../../../src/normalize/providers/openai-chat/__fixtures__'))
  .filter((file) => file.endsWith('.request.json'))
  .map((file) => file.replace(/\.request\.json$/, ''))
/** Frozen: the mutations below share every part they do not replace, so nothing may change them. */
function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object') {
    for (const item of Object.values(value)) deepFreeze(item)
    Object.freeze(value)
  }
  return value
}
const BODIES = NAMES.map((name) => deepFreeze(structuredClone(fixture('openai-chat', name).body)))

const messagesSchema = z.array(openaiChatMessageSchema).min(1)
const toolsSchema = z.array(openaiChatToolSchema).nullish()

type Path = (string | number)[]
/** Every place inside `value` a mutation can hit (the value itself included). */
function paths(value: unknown, at: Path = []): Path[] {
  const out: Path[] = [at]
  if (Array.isArray(value)) {
    for (const [i, item] of value.entries()) out.push(...paths(item, [...at, i]))
  } else if (value && typeof value === 'object') for (const [key, item] of Object.entries(value)) out.push(...paths(item, [...at, key]))
  return out
}
/** `paths` of each recorded value, listed once (a run picks one; listing them per run cost most of the test). */
const pathsOf = new Map<unknown, Path[]>()
function cachedPaths(value: unknown): Path[] {
  let all = pathsOf.get(value)
  if (all === undefined) {
    all = paths(value)
    pathsOf.set(value, all)
  }
  return all
}
/**
 * `root` with the node at `path` replaced (or removed from its object). Only the containers on the path are
 * copied: the recorded value is never changed, and the rest is shared (neither pass mutates its input).
 */
function mutate(root: unknown, path: Path, replacement: unknown, remove: boolean): unknown {
  if (path.length === 0) return replacement
  const [key, ...rest] = path as [string | number, ...Path]
  const copy = (Array.isArray(root) ? [...root] : { ...(root as object) }) as Record<string | number, unknown>
  if (rest.length > 0) copy[key] = mutate(copy[key], rest, replacement, remove)
  else if (remove && !Array.isArray(copy)) delete copy[key]
  else copy[key] = replacement
  return copy
}

const ODD = [
  null,
  '',
  'bogus',
  'function',
  'user',
  0,
  -1,
  1,
  1.5,
  2,
  2.5,
  20,
  21,
  1e20,
  true,
  false,
  [],
  [{}],
  ['x'],
  [1],
  {},
  { type: 'text' },
  { type: 1 },
  { name: '' },
  { include_usage: 1 },
]
const replacement = fc.oneof(fc.constantFrom(...ODD), fc.jsonValue({ maxDepth: 2 }))

describe('the structural pass over OpenAI chat requests', () => {
  it('takes every recorded harness request (the fast path is really used)', () => {
    expect(BODIES.length).toBeGreaterThan(10)
    for (const body of BODIES) {
      expect(requestLooksValid(body)).toBe(true)
      expect(messagesLookValid(body.messages)).toBe(true)
      expect(toolsLookValid(body.tools)).toBe(true)
    }
  })

  it('never accepts messages or tools the schema refuses (mutations of the recorded requests)', () => {
    const targets = BODIES.flatMap((body) => [
      { kind: 'messages' as const, value: body.messages },
      { kind: 'tools' as const, value: body.tools },
    ]).filter((target) => target.value !== undefined)
    fc.assert(
      fc.property(fc.nat(), fc.nat(), replacement, fc.boolean(), (which, where, value, remove) => {
        const target = targets[which % targets.length] as (typeof targets)[number]
        const all = cachedPaths(target.value)
        const mutated = mutate(target.value, all[where % all.length] as Path, value, remove)
        const fast = target.kind === 'messages' ? messagesLookValid(mutated) : toolsLookValid(mutated)
        if (fast) expect((target.kind === 'messages' ? messagesSchema : toolsSchema).safeParse(mutated).success).toBe(true)
      }),
      { numRuns: 3000 },
    )
  })

  it('never accepts a request the schema refuses (mutations anywhere in the recorded requests, top-level fields added)', () => {
    const KEYS = [
      'model',
      'stream',
      'stream_options',
      'n',
      'max_tokens',
      'max_completion_tokens',
      'temperature',
      'top_p',
      'stop',
      'logprobs',
      'top_logprobs',
      'messages',
      'tools',
    ]
    fc.assert(
      fc.property(
        fc.nat(),
        fc.nat(),
        fc.constantFrom(...KEYS),
        replacement,
        fc.boolean(),
        fc.boolean(),
        (which, where, key, value, remove, atKey) => {
          const body = BODIES[which % BODIES.length] as Record<string, unknown>
          const all = cachedPaths(body)
          const mutated = atKey ? mutate(body, [key], value, remove) : mutate(body, all[where % all.length] as Path, value, remove)
          if (requestLooksValid(mutated)) expect(openaiChatRequestSchema.safeParse(mutated).success).toBe(true)
        },
      ),
      { numRuns: 4000 },
    )
  })

  it('takes every edge of what the schema allows (boundaries, nulls, absent fields): valid requests are never sent to zod', () => {
    const base = BODIES[0] as Record<string, unknown>
    const call = { id: 'call_1', type: 'function', function: { name: 'bash', arguments: '{}' } }
    const tool = { type: 'function', function: { name: 'bash', description: 'runs', parameters: { type: 'object' } } }
    const withMessages = (...messages: unknown[]) => ({ ...base, messages })
    const cases: [string, unknown][] = [
      ['a message without content', withMessages({ role: 'assistant', tool_calls: [call] })],
      ['content null', withMessages({ role: 'assistant', content: null })],
      ['tool_calls null', withMessages({ role: 'assistant', content: 'x', tool_calls: null })],
      ['a tool call without id or type', withMessages({ role: 'assistant', tool_calls: [{ function: call.function }] })],
      [
        'arguments as an object',
        withMessages({ role: 'assistant', tool_calls: [{ ...call, function: { name: 'f', arguments: { a: 1 } } }] }),
      ],
      ['tool_call_id null', withMessages({ role: 'user', content: 'x', tool_call_id: null })],
      ['tools null', { ...base, tools: null }],
      ['tools empty', { ...base, tools: [] }],
      ['a tool without description or parameters', { ...base, tools: [{ type: 'function', function: { name: 'f' } }] }],
      [
        'description and parameters null',
        { ...base, tools: [{ type: 'function', function: { name: 'f', description: null, parameters: null } }] },
      ],
      ['a tool with parameters', { ...base, tools: [tool] }],
      ['stream, logprobs, stream_options null', { ...base, stream: null, logprobs: null, stream_options: null }],
      ['include_usage null', { ...base, stream_options: { include_usage: null } }],
      ['n 1', { ...base, n: 1 }],
      ['n null', { ...base, n: null }],
      ['top_logprobs 0', { ...base, top_logprobs: 0 }],
      ['top_logprobs 20', { ...base, top_logprobs: 20 }],
      ['max_tokens 1', { ...base, max_tokens: 1, max_completion_tokens: 1 }],
      ['max_tokens huge', { ...base, max_tokens: Number.MAX_SAFE_INTEGER, max_completion_tokens: Number.MAX_SAFE_INTEGER }],
      ['temperature 0, top_p 0', { ...base, temperature: 0, top_p: 0 }],
      ['temperature 2, top_p 1', { ...base, temperature: 2, top_p: 1 }],
      ['temperature 0.7, top_p 0.95', { ...base, temperature: 0.7, top_p: 0.95 }],
      ['temperature 1.5, top_p 0.5', { ...base, temperature: 1.5, top_p: 0.5 }],
      ['stop a string', { ...base, stop: '</s>' }],
      ['stop strings', { ...base, stop: ['</s>', '\n\n'] }],
      ['stop empty', { ...base, stop: [] }],
      ['stop null', { ...base, stop: null }],
    ]
    for (const [name, body] of cases) {
      expect(openaiChatRequestSchema.safeParse(body).success, name).toBe(true)
      expect(requestLooksValid(body), name).toBe(true)
    }
  })

  it('a refused request still gets the schema’s own error (param and message)', () => {
    const body = structuredClone(BODIES[0]) as { messages: { role: string }[] }
    ;(body.messages[0] as { role: string }).role = 'robot'
    expect(() => openaiChat.parseRequest(body, new URL('http://edge.test/v1/chat/completions'))).toThrow(/^messages\[0\]\.role: /)
    const noName = { ...structuredClone(BODIES[0]), tools: [{ type: 'function', function: { name: '' } }] }
    expect(() => openaiChat.parseRequest(noName, new URL('http://edge.test/v1/chat/completions'))).toThrow(/^tools\[0\]\.function\.name: /)
  })
})
