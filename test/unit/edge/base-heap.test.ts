/**
 * What a delta base is charged (`baseBytes` in `completion-log.ts`, the figure the isolate's budget adds up)
 * is an upper bound of the V8 heap it holds, and not a loose one: held bases of 524 KB-shaped calls (a chat
 * body, its upstream edit, 131k prompt ids as the engine's JSON text) are measured with the collector run
 * before and after the logs are let go (`v8.getHeapStatistics`: heap plus external memory, where typed
 * arrays live). Bases recorded from the engine's text and bases rebuilt from storage after a wake; ASCII
 * bodies (V8 keeps them at one byte a character: charged at two, so ~0.8 of the charge is real) and bodies
 * with one character past Latin-1 (two bytes a character: the charge is nearly exact).
 */
import v8 from 'node:v8'
import { runInNewContext } from 'node:vm'
import { describe, expect, it } from 'vitest'
import { MemoryBucket, nodeSql } from '../../../scripts/lib/node-sqlite.ts'
import { chatBody } from '../../../bench/lib/chat-bodies.ts'
import { BaseBudget } from '../../../src/durable/session/base-cache-budget.ts'
import { BlobStore } from '../../../src/durable/session/blob-store.ts'
import { CompletionLog } from '../../../src/durable/session/completion-log.ts'
import { ensureSchema } from '../../../src/durable/session/schema.ts'
import type { Sql } from '../../../src/durable/session/sql.ts'
import { parseEngineAnswerText } from '../../../src/normalize/engine/prompt-ids-text.ts'
import { completionInput } from '../../support/records.ts'

v8.setFlagsFromString('--expose-gc')
const gc = runInNewContext('gc') as () => void

/** Heap and external bytes in use after full collections. */
function heldBytes(): number {
  for (let i = 0; i < 3; i++) gc()
  const stats = v8.getHeapStatistics()
  return stats.used_heap_size + stats.external_memory
}

const LOGS = 6
const PROMPT_IDS = 131_072

/**
 * A fresh copy of `text` as the edge reads it from the wire (UTF-8 decoded: one byte a character in V8 unless
 * a character is past Latin-1), not a slice of anything the test keeps.
 */
function copied(text: string): string {
  return Buffer.from(text, 'utf8').toString('utf8')
}

const promptTexts = new Map<number, string>()
/** Log `n`'s prompt ids as the engine's JSON text (built once per test file). */
function promptText(n: number): string {
  let text = promptTexts.get(n)
  if (text === undefined) {
    text = JSON.stringify(Array.from({ length: PROMPT_IDS }, (_, i) => (i * 7919 + n) % 151_000))
    promptTexts.set(n, text)
  }
  return text
}

/**
 * Log `n`'s prompt text the way a session object receives it: cut by the edge out of an engine answer (whose
 * completion has a character past Latin-1 when `wide`: V8 then holds the whole answer at two bytes a
 * character) as UTF-8 bytes, and sent over RPC (a structured clone: a copy of the bytes).
 */
function promptTextFromAnswer(n: number, wide: boolean): Uint8Array {
  const ids = promptText(n)
  const content = `done ${n}${wide ? ' 完成 ☃' : ''}`
  const answer = `{"id":"cmpl-${n}","object":"chat.completion","model":"Qwen/Qwen3-8B","prompt_token_ids":${ids},"choices":[{"index":0,"message":{"role":"assistant","content":${JSON.stringify(content)}},"finish_reason":"stop","token_ids":[1,2,3]}],"usage":{"prompt_tokens":${PROMPT_IDS},"completion_tokens":3,"total_tokens":${PROMPT_IDS + 3}}}`
  const { promptIdsBytes } = parseEngineAnswerText(copied(answer))
  expect(Buffer.from(promptIdsBytes as Uint8Array).toString('latin1')).toBe(ids)
  return v8.deserialize(v8.serialize(promptIdsBytes)) as Uint8Array
}

const bodies = new Map<string, string>()
/** Log `n`'s 512 KB chat body (one character past Latin-1 when `wide`), built once per test file. */
function bodyText(n: number, wide: boolean): string {
  const key = `${n}${wide}`
  let body = bodies.get(key)
  if (body === undefined) {
    body = JSON.stringify(chatBody(512 * 1024, `model-${n}${wide ? ' ☃' : ''}`))
    bodies.set(key, body)
  }
  return body
}

/** `LOGS` logs of one large call each (different bodies and ids), on one budget that holds them all. */
async function recordBases(
  wide: boolean,
  budget: BaseBudget,
  answer: 'none' | 'ascii' | 'wide' = 'none',
): Promise<{ logs: CompletionLog[]; stores: { sql: Sql; bucket: MemoryBucket }[]; budget: BaseBudget }> {
  const logs: CompletionLog[] = []
  const stores: { sql: Sql; bucket: MemoryBucket }[] = []
  for (let n = 0; n < LOGS; n++) {
    const body = bodyText(n, wide)
    const end = body.lastIndexOf('}')
    const insert = `,"stream":false,"logprobs":1,"return_tokens_as_token_ids":true,"model":"Qwen/Qwen3-8B"}`
    const { sql } = nodeSql()
    ensureSchema(sql)
    const bucket = new MemoryBucket()
    const log = new CompletionLog(sql, new BlobStore(bucket), `ses_heap_${n}`, { budget })
    await log.record(
      completionInput({
        completion_id: `heap_${n}`,
        prompt_token_ids: null,
        prompt_token_text: answer === 'none' ? copied(promptText(n)) : promptTextFromAnswer(n, answer === 'wide'),
        original_text: copied(body),
        request_text: '',
        request_delta: { prefix: end, suffix: 0, middle: insert },
      }),
    )
    logs.push(log)
    stores.push({ sql, bucket })
  }
  return { logs, stores, budget }
}

/** Heap in use while what `make` built lives (in a frame of its own: nothing on the stack keeps it after). */
async function heldWhile(make: () => Promise<{ logs: CompletionLog[]; budget: BaseBudget }>): Promise<{ held: number; charged: number }> {
  const alive = async () => {
    const { logs, budget } = await make()
    const held = heldBytes()
    expect(logs).toHaveLength(LOGS)
    return { held, charged: budget.bytes }
  }
  const { held, charged } = await alive()
  return { held: held - heldBytes(), charged }
}

/**
 * Heap the cached bases hold and what they were charged: the same logs built twice, on a budget that keeps
 * them all and on one that keeps only the entry just added (the logs' other memory, spilled bodies and
 * SQLite's, is the same in both).
 */
async function measure(make: (budget: BaseBudget) => Promise<{ logs: CompletionLog[]; budget: BaseBudget }>) {
  const all = await heldWhile(() => make(new BaseBudget(2 ** 30)))
  const none = await heldWhile(() => make(new BaseBudget(0)))
  return { real: all.held - none.held, charged: all.charged - none.charged }
}

// Each case records 24 calls of 512 KB and collects the heap twelve times: seconds of CPU, not a race.
describe('a delta base’s charge against its heap', { timeout: 60_000 }, () => {
  for (const wide of [false, true]) {
    it(`recorded from the engine’s text, ${wide ? 'two-byte' : 'ASCII'} bodies: charged at least what it holds`, async () => {
      const { real, charged } = await measure((budget) => recordBases(wide, budget))
      expect(charged / (LOGS - 1)).toBeGreaterThan(2 * 2 ** 20)
      expect(real).toBeLessThanOrEqual(charged)
      expect(real / charged).toBeGreaterThan(wide ? 0.9 : 0.7)
    })

    it(`prompt ids cut from an engine answer with a character past Latin-1, ${wide ? 'two-byte' : 'ASCII'} bodies: charged at least what it holds`, async () => {
      const { real, charged } = await measure((budget) => recordBases(wide, budget, 'wide'))
      expect(real).toBeLessThanOrEqual(charged)
      expect(real / charged).toBeGreaterThan(wide ? 0.9 : 0.7)
    })

    it(`rebuilt from storage after a wake, ${wide ? 'two-byte' : 'ASCII'} bodies: charged at least what it holds`, async () => {
      const { real, charged } = await measure(async (budget) => {
        const { stores } = await recordBases(wide, new BaseBudget(0))
        const logs = stores.map(({ sql, bucket }, n) => new CompletionLog(sql, new BlobStore(bucket), `ses_heap_${n}`, { budget }))
        // A read rebuilds the base; the next turn's comparison adds its canonical prompt text and layout.
        for (const [n, log] of logs.entries()) {
          await log.requestText(0)
          await log.record(completionInput({ completion_id: `again_${n}`, prompt_token_ids: null, prompt_token_text: '[1,2]' }))
        }
        return { logs, budget }
      })
      expect(real).toBeLessThanOrEqual(charged)
      expect(real / charged).toBeGreaterThan(wide ? 0.85 : 0.65)
    })
  }
})
