/**
 * @module
 * A strict SSE reader for tests: splits encoder output into frames and checks each frame re-encodes to
 * the exact bytes it came from (so "re-parses to the same events" is a byte-level property).
 */

export interface SseFrame {
  event: string | null
  data: string | null
  comment: string | null
  /** A bare empty line between frames (Gemini's keep-alive): dispatches nothing; re-encodes to `\n`. */
  blank?: true
}

export function parseSseFrames(text: string): SseFrame[] {
  if (text === '') return []
  if (!text.endsWith('\n')) throw new Error(`stream does not end with a line break: ${JSON.stringify(text.slice(-40))}`)
  const frames: SseFrame[] = []
  let rest = text
  while (rest.length > 0) {
    if (rest.startsWith('\n')) {
      frames.push({ event: null, data: null, comment: null, blank: true })
      rest = rest.slice(1)
      continue
    }
    const end = rest.indexOf('\n\n')
    if (end < 0) throw new Error(`stream does not end with a blank line: ${JSON.stringify(rest.slice(-40))}`)
    const block = rest.slice(0, end)
    rest = rest.slice(end + 2)
    const frame: SseFrame = { event: null, data: null, comment: null }
    for (const line of block.split('\n')) {
      if (line.startsWith(': ')) frame.comment = line.slice(2)
      else if (line.startsWith('event: ')) {
        if (frame.event !== null) throw new Error(`two event lines in one frame: ${block}`)
        frame.event = line.slice(7)
      } else if (line.startsWith('data: ')) {
        if (frame.data !== null) throw new Error(`multi-line data (unescaped newline) in frame: ${block}`)
        frame.data = line.slice(6)
      } else throw new Error(`unexpected SSE line ${JSON.stringify(line)}`)
    }
    if (frame.comment !== null && (frame.event !== null || frame.data !== null)) {
      throw new Error(`comment mixed with fields: ${block}`)
    }
    if (frame.comment === null && frame.data === null) throw new Error(`frame without data: ${block}`)
    frames.push(frame)
  }
  return frames
}

export function encodeSseFrames(frames: SseFrame[]): string {
  return frames
    .map((frame) => {
      if (frame.blank) return '\n'
      if (frame.comment !== null) return `: ${frame.comment}\n\n`
      return `${frame.event !== null ? `event: ${frame.event}\n` : ''}data: ${frame.data}\n\n`
    })
    .join('')
}

/** Data frames as JSON (comments and `[DONE]` left out). */
export function jsonEvents(frames: SseFrame[]): Record<string, unknown>[] {
  return frames
    .filter((frame) => frame.data !== null && frame.data !== '[DONE]')
    .map((frame) => JSON.parse(frame.data as string) as Record<string, unknown>)
}
