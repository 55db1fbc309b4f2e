/**
 * @module
 * The provider adapter contract, declared once. Each provider folder exports one value typed with it;
 * this file imports no provider.
 */
import type { ApiId, Completion, NormalizedError, ParsedRequest, TokenizeRequest } from './types.ts'

/** Per-request facts an adapter needs to answer in its own wire format. */
export interface ResponseContext {
  /** Model name to show the harness (what it asked for). */
  modelRequested: string
  /** Stable id of the recorded completion; adapters derive their wire ids from it. */
  completionId: string
  streamUsage: boolean
  /** Unix seconds. */
  created: number
  /** `ParsedRequest.responseOptions` of this call, passed through untouched. */
  responseOptions?: Record<string, unknown>
}

export interface StreamEncoder {
  /** Frames that may go out before the completion is known (e.g. nothing, or a role chunk). */
  start(): string
  /** A keep-alive frame while the upstream is still working. */
  heartbeat(): string
  /** The whole answer as frames, ending with the protocol's terminator. */
  completion(completion: Completion): string
  /** A mid-stream failure, ending the stream in the protocol's own error shape. */
  error(error: NormalizedError): string
}

/** An API's count-tokens endpoint, answered from the engine's `/tokenize` (never a generation). */
export interface CountTokensAdapter {
  /** `POST /v1/messages/count_tokens`, `…:countTokens`. */
  matches(url: URL): boolean
  /** Wire body → `/tokenize` body; throws `RequestValidationError` for bad input. */
  parseRequest(body: unknown, url: URL): TokenizeRequest
  buildResponse(inputTokens: number): unknown
}

export interface ProviderAdapter {
  readonly id: ApiId
  /** Path first; headers only to break ties. */
  matches(url: URL, headers: Headers): boolean
  /**
   * Wire body (already JSON-parsed) → internal chat request. Throws `RequestValidationError` with a
   * field path for bad input. `url` carries what some APIs keep outside the body (Gemini's model).
   */
  parseRequest(body: unknown, url: URL): ParsedRequest
  buildResponse(completion: Completion, context: ResponseContext): unknown
  createStreamEncoder(context: ResponseContext): StreamEncoder
  buildError(error: NormalizedError): { status: number; body: unknown }
  /** Present when the API has a count-tokens endpoint. */
  readonly countTokens?: CountTokensAdapter
}

/** Bad client input, with the offending field, rendered by the caller's adapter as a 4xx. */
export class RequestValidationError extends Error {
  readonly param: string | null
  readonly status: number
  constructor(message: string, param: string | null = null, status = 400) {
    super(message)
    this.name = 'RequestValidationError'
    this.param = param
    this.status = status
  }
}
