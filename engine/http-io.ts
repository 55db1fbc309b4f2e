/**
 * @module engine/http-io
 * Minimal `node:http` plumbing: bounded body reading, JSON and SSE writers with the two
 * failure modes the fault API needs (truncated body, destroyed socket), and backpressure.
 */

import type { IncomingMessage, ServerResponse } from 'node:http'
import { setTimeout as sleep } from 'node:timers/promises'
import { EngineError } from './errors.ts'

/** uvicorn has no limit; this only protects the test machine. */
export const MAX_BODY_BYTES = 256 * 1024 * 1024

export function readBody(request: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    let size = 0
    request.on('data', (chunk: Buffer) => {
      size += chunk.length
      if (size > MAX_BODY_BYTES) {
        reject(new EngineError(413, `Request body exceeds ${MAX_BODY_BYTES} bytes`))
        request.destroy()
        return
      }
      chunks.push(chunk)
    })
    request.on('end', () => {
      const only = chunks.length === 1 ? chunks[0] : undefined
      resolve((only ?? Buffer.concat(chunks, size)).toString('utf8'))
    })
    request.on('error', reject)
  })
}

export interface WriteOptions {
  /** Send headers and half of the body, then destroy the socket. */
  truncate?: boolean | undefined
  headers?: Record<string, string> | undefined
}

export function sendJson(response: ServerResponse, status: number, body: string, options: WriteOptions = {}) {
  const bytes = Buffer.from(body, 'utf8')
  response.writeHead(status, {
    'content-type': 'application/json',
    'content-length': bytes.length,
    ...options.headers,
  })
  if (options.truncate === true) {
    response.write(bytes.subarray(0, bytes.length >> 1), () => response.destroy())
    return
  }
  response.end(bytes)
}

export function sendEmpty(response: ServerResponse, status: number): void {
  response.writeHead(status, { 'content-length': 0 })
  response.end()
}

export interface StreamOptions extends WriteOptions {
  /** Pause between frames (per-token latency). */
  frameDelayMs: number
}

export async function sendEventStream(response: ServerResponse, frames: readonly string[], options: StreamOptions): Promise<void> {
  response.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    ...options.headers,
  })
  const limit = options.truncate === true ? Math.max(1, frames.length >> 1) : frames.length
  if (options.frameDelayMs <= 0) {
    // One write: the client parses SSE frames the same, and it is far cheaper.
    await finish(response, frames.slice(0, limit).join(''), options.truncate === true)
    return
  }
  for (let index = 0; index < limit; index++) {
    if (response.destroyed) return
    if (index > 0) await sleep(options.frameDelayMs)
    const frame = frames[index] ?? ''
    if (index === limit - 1) {
      await finish(response, frame, options.truncate === true)
    } else if (!response.write(frame)) {
      await new Promise<void>((resolve) => {
        response.once('drain', resolve)
        response.once('close', resolve)
      })
    }
  }
}

function finish(response: ServerResponse, chunk: string, truncate: boolean): Promise<void> {
  return new Promise((resolve) => {
    if (response.destroyed) {
      resolve()
      return
    }
    response.once('close', () => resolve())
    if (truncate) {
      response.write(chunk, () => {
        response.destroy()
        resolve()
      })
    } else {
      response.end(chunk, () => resolve())
    }
  })
}
