/**
 * When the completion log codes a body sent upstream as copies of the harness's body (`request_edits`, schema
 * v4), exactly: a middle shorter than 256 characters stays plain, a code must store at most half the middle's
 * characters, an edit list longer than 64 KiB of JSON is not kept; a coded row whose edits do not decode to its
 * stored length is refused when read. Every body reads back exactly in every case.
 */
import { describe, expect, it } from 'vitest'
import { MemoryBucket, nodeSql } from '../../../scripts/lib/node-sqlite.ts'
import { BlobStore } from '../../../src/durable/session/blob-store.ts'
import { CompletionLog } from '../../../src/durable/session/completion-log.ts'
import type { CompletionInput } from '../../../src/durable/session/record.ts'
import { ensureSchema } from '../../../src/durable/session/schema.ts'
import { copyCode } from '../../../src/durable/session/text-delta.ts'
import { CAPTURE_SESSION } from '../../support/edge-capture.ts'
import { completionInput } from '../../support/records.ts'

/** Text without long repeats, over an alphabet without `Z` (the literals below). */
function text(length: number, seed: number): string {
  const alphabet = 'abcdefghijklmnopqrstuvwxy0123456789 '
  let state = seed
  let out = ''
  for (let i = 0; i < length; i++) {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0
    out += alphabet[(state >>> 16) % alphabet.length]
  }
  return out
}

async function logOf(inputs: readonly { request: string; original: string }[]) {
  const { sql } = nodeSql()
  ensureSchema(sql)
  const bucket = new MemoryBucket()
  const id = CAPTURE_SESSION.session_id
  const writer = new CompletionLog(sql, new BlobStore(bucket), id, { requestEdits: true })
  const records: CompletionInput[] = inputs.map((input, i) =>
    completionInput({ completion_id: `cmpl_${i}`, request_text: input.request, original_text: input.original }),
  )
  for (const record of records) await writer.record(record)
  const cold = () => new CompletionLog(sql, new BlobStore(bucket), id)
  const coded = (seq: number) =>
    sql.first<{ request_edits: string | null }>('SELECT request_edits FROM rg_completions WHERE seq = ?', seq)?.request_edits ?? null
  return { sql, cold, coded, records }
}

/** Whether a lone body (its whole text is the middle: it shares no first or last character with the original) is coded. */
async function codedAlone(request: string, original: string): Promise<boolean> {
  const log = await logOf([{ request, original }])
  expect(await log.cold().requestText(0)).toBe(request)
  return log.coded(0) !== null
}

const SOURCE = text(4_000, 7)

describe('request_edits: when a body is coded', () => {
  it('a middle of 256 characters is coded, one of 255 stays plain', async () => {
    const body = (length: number) => `Z${SOURCE.slice(100, 100 + length - 2)}Z`
    expect(await codedAlone(body(256), SOURCE)).toBe(true)
    expect(await codedAlone(body(255), SOURCE)).toBe(false)
  })

  it('a code is kept when it stores at most half the middle (rounded down), else the middle stays plain', async () => {
    // More literal characters cost one each; the middle grows by one, half of it by a half.
    const body = (literals: number) => `${'Z'.repeat(literals)}${SOURCE.slice(200, 700)}Z`
    const fits = (literals: number) => {
      const middle = body(literals)
      return copyCode(SOURCE, middle, Math.floor(middle.length / 2)) !== null
    }
    let most = 0
    while (fits(most + 1)) most++
    expect(most).toBeGreaterThan(100)
    expect(await codedAlone(body(most), SOURCE)).toBe(true)
    expect(await codedAlone(body(most + 1), SOURCE)).toBe(false)
  })

  it('an edit list of exactly 64 KiB of JSON is kept, one character more is not', async () => {
    // 5,462 copies of 30 characters, each after a one-character literal: ops [1, start, 30], so the JSON is
    // 1 + Σ (digits of start + 6) characters: 6-digit starts but for `short` 5-digit ones.
    const original = text(400_000, 11)
    const body = (short: number) => {
      let middle = ''
      for (let i = 0; i < 5_462; i++) {
        const start = i < short ? 10_000 + i * 997 : 100_000 + i * 53
        middle += `Z${original.slice(start, start + 30)}`
      }
      return `${middle}Z`
    }
    const jsonLength = (middle: string) => JSON.stringify(copyCode(original, middle, Number.MAX_SAFE_INTEGER)?.ops).length
    const exact = body(9)
    expect(jsonLength(exact)).toBe(64 * 1024)
    expect(await codedAlone(exact, original)).toBe(true)
    const over = body(8)
    expect(jsonLength(over)).toBe(64 * 1024 + 1)
    expect(await codedAlone(over, original)).toBe(false)
  })
})

describe('request_edits: reading a coded row', () => {
  it('a coded row whose edits do not decode to its stored length is refused, naming the completion', async () => {
    const request = `Z${SOURCE.slice(100, 1_100)}Z`
    const log = await logOf([{ request, original: SOURCE }])
    expect(log.coded(0)).not.toBeNull()
    log.sql.run('UPDATE rg_completions SET request_length = request_length + 1 WHERE seq = 0')
    await expect(log.cold().requestText(0)).rejects.toThrow('completion 0: its request edits do not decode to the stored length')
  })
})
