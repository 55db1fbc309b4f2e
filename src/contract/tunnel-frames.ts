/**
 * @module
 * Binary tunnel frames (capability `tunnel.binary`, see `runner-protocol.ts`): the body-carrying tunnel
 * messages (`tunnel.request`, `tunnel.body` edge → runner; `tunnel.head`, `tunnel.chunk` runner → edge)
 * as one binary WebSocket message each, so a body crosses the link as its raw bytes: no JSON escaping
 * (which grows a JSON body by a sixth and costs a pass on each side), no UTF-8 decode/encode round trip.
 *
 * Layout: byte 0 = `FRAME_FORMAT` (1); bytes 1–4 = the metadata's length N (uint32, big-endian); then N
 * bytes of metadata (UTF-8 JSON: the message without its body field, `body` / `data`); then the body bytes.
 * Every other message stays a JSON text message. Metadata is validated with the same zod schemas as the
 * JSON messages (minus the body field); a frame whose metadata has exactly the shape a sender writes takes a
 * plain structural check instead (the same rules, no schema walk: it runs for every frame on both ends), and
 * anything else goes to zod, which accepts or names the problem as before.
 */
import { z } from 'zod'
import { tunnelBodySchema, tunnelChunkSchema, tunnelHeadSchema, tunnelRequestSchema } from './runner-protocol.ts'

/** Version byte that opens every binary tunnel frame. */
export const FRAME_FORMAT = 1
const HEADER_BYTES = 5

/** A body in a tunnel message: text (JSON frames) or bytes (binary frames). */
export type Payload = string | Uint8Array

export type TunnelRequestFrame = Omit<z.infer<typeof tunnelRequestSchema>, 'body'> & { body: Payload }
export type TunnelBodyFrame = Omit<z.infer<typeof tunnelBodySchema>, 'data'> & { data: Payload }
export type TunnelHeadFrame = Omit<z.infer<typeof tunnelHeadSchema>, 'body'> & { body: Payload }
export type TunnelChunkFrame = Omit<z.infer<typeof tunnelChunkSchema>, 'data'> & { data: Payload }
/** Edge → runner frames that carry body bytes. */
export type EdgeBodyFrame = TunnelRequestFrame | TunnelBodyFrame
/** Runner → edge frames that carry body bytes. */
export type RunnerBodyFrame = TunnelHeadFrame | TunnelChunkFrame

const edgeMetaSchema = z.discriminatedUnion('type', [tunnelRequestSchema.omit({ body: true }), tunnelBodySchema.omit({ data: true })])
const runnerMetaSchema = z.discriminatedUnion('type', [tunnelHeadSchema.omit({ body: true }), tunnelChunkSchema.omit({ data: true })])

const encoder = new TextEncoder()
const decoder = new TextDecoder()

/** Body length in bytes (text counts as its UTF-8 encoding). */
export function payloadBytes(payload: Payload): Uint8Array {
  return typeof payload === 'string' ? encoder.encode(payload) : payload
}

/** Body as text (bytes are decoded as UTF-8). */
export function payloadText(payload: Payload): string {
  return typeof payload === 'string' ? payload : decoder.decode(payload)
}

/** A body frame's metadata (the message without its body field, built field by field) and its body. */
function metaAndPayload(frame: EdgeBodyFrame | RunnerBodyFrame): [string, Payload] {
  switch (frame.type) {
    case 'tunnel.request': {
      const { request_id, method, path, headers, more, timeout_ms } = frame
      return [JSON.stringify({ type: frame.type, request_id, method, path, headers, more, timeout_ms }), frame.body]
    }
    case 'tunnel.head': {
      const { request_id, status, headers, more } = frame
      return [JSON.stringify({ type: frame.type, request_id, status, headers, more }), frame.body]
    }
    default:
      return [JSON.stringify({ type: frame.type, request_id: frame.request_id, more: frame.more }), frame.data]
  }
}

/** Header and metadata written into `out` (room for `HEADER_BYTES` + 3 bytes per metadata character); their length. */
function writeHead(out: Uint8Array, meta: string): number {
  const { written } = encoder.encodeInto(meta, out.subarray(HEADER_BYTES))
  out[0] = FRAME_FORMAT
  new DataView(out.buffer, out.byteOffset, HEADER_BYTES).setUint32(1, written)
  return HEADER_BYTES + written
}

/**
 * A body-carrying frame as its two parts: the header with the metadata, and the body's bytes (not copied).
 * Concatenated they are the binary message (`encodeTunnelFrame`); a sender that can write one WebSocket
 * message in fragments sends them as they are, without copying the body.
 */
export function tunnelFrameParts(frame: EdgeBodyFrame | RunnerBodyFrame): [Uint8Array, Uint8Array] {
  const [meta, payload] = metaAndPayload(frame)
  const head = new Uint8Array(HEADER_BYTES + meta.length * 3)
  return [head.subarray(0, writeHead(head, meta)), payloadBytes(payload)]
}

/** One binary WebSocket message for a body-carrying frame (its payload copied once, behind the header). */
export function encodeTunnelFrame(frame: EdgeBodyFrame | RunnerBodyFrame): Uint8Array {
  const [meta, payload] = metaAndPayload(frame)
  const body = payloadBytes(payload)
  const out = new Uint8Array(HEADER_BYTES + meta.length * 3 + body.byteLength)
  const headLength = writeHead(out, meta)
  out.set(body, headLength)
  return out.subarray(0, headLength + body.byteLength)
}

function split(data: Uint8Array): { meta: unknown; payload: Uint8Array } {
  if (data.length < HEADER_BYTES) throw new Error('binary tunnel frame shorter than its header')
  if (data[0] !== FRAME_FORMAT) throw new Error(`binary tunnel frame format ${data[0]} is not ${FRAME_FORMAT}`)
  const metaLength = new DataView(data.buffer, data.byteOffset, data.byteLength).getUint32(1)
  if (HEADER_BYTES + metaLength > data.length) throw new Error('binary tunnel frame metadata runs past its end')
  const meta: unknown = JSON.parse(decoder.decode(data.subarray(HEADER_BYTES, HEADER_BYTES + metaLength)))
  return { meta, payload: data.subarray(HEADER_BYTES + metaLength) }
}

type EdgeMeta = z.infer<typeof edgeMetaSchema>
type RunnerMeta = z.infer<typeof runnerMetaSchema>

function isStringRecord(value: unknown): value is Record<string, string> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false
  for (const key in value) if (typeof (value as Record<string, unknown>)[key] !== 'string') return false
  return true
}

/**
 * The metadata as zod would return it, when it is the plain well-formed shape; null sends it to zod (which
 * accepts what this does not cover, e.g. defaults, or names the problem). Unknown keys are left out, as zod does.
 */
function plainRunnerMeta(meta: unknown): RunnerMeta | null {
  if (typeof meta !== 'object' || meta === null) return null
  const m = meta as Record<string, unknown>
  if (typeof m.request_id !== 'string' || typeof m.more !== 'boolean') return null
  if (m.type === 'tunnel.chunk') return { type: 'tunnel.chunk', request_id: m.request_id, more: m.more }
  if (m.type !== 'tunnel.head') return null
  const status = m.status
  if (typeof status !== 'number' || !Number.isSafeInteger(status) || status < 100 || status > 599 || !isStringRecord(m.headers)) return null
  return { type: 'tunnel.head', request_id: m.request_id, status, headers: m.headers, more: m.more }
}

/** `plainRunnerMeta` for the edge's frames. */
function plainEdgeMeta(meta: unknown): EdgeMeta | null {
  if (typeof meta !== 'object' || meta === null) return null
  const m = meta as Record<string, unknown>
  if (typeof m.request_id !== 'string' || typeof m.more !== 'boolean') return null
  if (m.type === 'tunnel.body') return { type: 'tunnel.body', request_id: m.request_id, more: m.more }
  if (m.type !== 'tunnel.request') return null
  const { method, path, headers, timeout_ms: timeout } = m
  if (typeof method !== 'string' || typeof path !== 'string' || !isStringRecord(headers)) return null
  if (typeof timeout !== 'number' || !Number.isSafeInteger(timeout)) return null
  return { type: 'tunnel.request', request_id: m.request_id, method, path, headers, more: m.more, timeout_ms: timeout }
}

function issue(error: z.ZodError): string {
  const first = error.issues[0]
  return `invalid binary tunnel frame: ${first?.message ?? 'unknown'} at ${first?.path.join('.') ?? ''}`
}

/** A runner's binary frame (`tunnel.head` / `tunnel.chunk`), its body a view of `data` (no copy). Throws when malformed. */
export function decodeRunnerFrame(data: Uint8Array): RunnerBodyFrame {
  const { meta, payload } = split(data)
  let parsed = plainRunnerMeta(meta)
  if (!parsed) {
    const checked = runnerMetaSchema.safeParse(meta)
    if (!checked.success) throw new Error(issue(checked.error))
    parsed = checked.data
  }
  return parsed.type === 'tunnel.head' ? { ...parsed, body: payload } : { ...parsed, data: payload }
}

/** The edge's binary frame (`tunnel.request` / `tunnel.body`), its body a view of `data` (no copy). Throws when malformed. */
export function decodeEdgeFrame(data: Uint8Array): EdgeBodyFrame {
  const { meta, payload } = split(data)
  let parsed = plainEdgeMeta(meta)
  if (!parsed) {
    const checked = edgeMetaSchema.safeParse(meta)
    if (!checked.success) throw new Error(issue(checked.error))
    parsed = checked.data
  }
  return parsed.type === 'tunnel.request' ? { ...parsed, body: payload } : { ...parsed, data: payload }
}

/** Split bytes into binary frames' worth (views, no copies; at least one, possibly empty). */
export function chunkBytes(bytes: Uint8Array, size: number): Uint8Array[] {
  if (bytes.length <= size) return [bytes]
  const chunks: Uint8Array[] = []
  for (let offset = 0; offset < bytes.length; offset += size) chunks.push(bytes.subarray(offset, Math.min(offset + size, bytes.length)))
  return chunks
}
