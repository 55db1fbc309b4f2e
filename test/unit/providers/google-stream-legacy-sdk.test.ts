/**
 * Gemini CLI 0.61 bundles `@google/genai` 1.x, whose stream parser only skips whitespace before `data:`
 * (`/^\s*data: (.*)(?:\n\n|\r\r|\r\n\r\n)/` over a growing buffer; leftovers at the end throw "Incomplete
 * JSON segment at the end"). The edge's Gemini stream, keep-alives included, must parse with it: an SSE
 * comment as keep-alive broke every Gemini CLI call that waited longer than the heartbeat.
 */
import { describe, expect, it } from 'vitest'
import { createGoogleStreamEncoder } from '../../../src/normalize/providers/google/google-stream.ts'
import { engineCompletion } from './adapter-server.ts'

/** The parse loop of `ApiClient.processStreamResponse` in @google/genai 1.x (as bundled by Gemini CLI 0.61). */
function legacyGenaiParse(chunks: string[]): unknown[] {
  const responseLineRE = /^\s*data: (.*)(?:\n\n|\r\r|\r\n\r\n)/
  const frames: unknown[] = []
  let buffer = ''
  for (const chunk of chunks) {
    buffer += chunk
    let match = buffer.match(responseLineRE)
    while (match) {
      frames.push(JSON.parse(match[1]!))
      buffer = buffer.slice(match[0].length)
      match = buffer.match(responseLineRE)
    }
  }
  if (buffer.trim().length > 0) throw new Error('Incomplete JSON segment at the end')
  return frames
}

describe('Gemini stream with keep-alives, parsed like Gemini CLI 0.61', () => {
  it('yields every frame and leaves nothing behind, however many keep-alives came first', () => {
    const encoder = createGoogleStreamEncoder({ modelRequested: 'gemini-2.5-flash', completionId: 'cmpl_1', streamUsage: true, created: 1 })
    const completion = engineCompletion({ role: 'assistant', content: 'Done.', reasoning_content: 'think' })
    for (const beats of [0, 1, 3]) {
      const chunks = [encoder.start(), ...Array.from({ length: beats }, () => encoder.heartbeat()), encoder.completion(completion)]
      const frames = legacyGenaiParse(chunks) as { candidates: { content: { parts: { text?: string }[] } }[] }[]
      expect(frames.length).toBeGreaterThanOrEqual(1)
      expect(JSON.stringify(frames)).toContain('Done.')
    }
  })
})
