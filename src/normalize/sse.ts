/**
 * @module
 * The one SSE frame encoder. Frames are `[event: <name>\n]data: <json>\n\n`; comments start with `:`.
 */

export function sseData(data: unknown): string {
  return `data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`
}

export function sseEvent(event: string, data: unknown): string {
  return `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`
}

/** A comment frame: every SSE parser ignores it, proxies see traffic. */
export function sseComment(text: string): string {
  return `: ${text}\n\n`
}

export const SSE_HEADERS: Record<string, string> = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache',
  connection: 'keep-alive',
  'x-accel-buffering': 'no',
}
