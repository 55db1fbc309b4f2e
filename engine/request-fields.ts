/**
 * @module engine/request-fields
 * Hand-rolled readers for request fields shared by `/v1/chat/completions` and `/v1/completions`
 * (no schema library on the hot path: bodies reach 500 KB at ~1000 req/s). Invalid values are
 * rejected with 400s naming the parameter, like vLLM's pydantic validation.
 */

import { isRecord } from './chat-template-input.ts'
import { badRequest } from './errors.ts'

/** vLLM's default `--max-logprobs`. */
export const MAX_TOP_LOGPROBS = 20

export interface SamplingFields {
  stream: boolean
  includeUsage: boolean
  continuousUsage: boolean
  n: number
  /** `max_completion_tokens ?? max_tokens`; `null` = up to the context window. */
  maxTokens: number | null
  stop: string[]
  stopTokenIds: number[]
  includeStopStrInOutput: boolean
  skipSpecialTokens: boolean
  returnTokenIds: boolean
  returnTokensAsTokenIds: boolean
  /** Per-request seed overriding the engine's. */
  seed: number | null
}

export function readBoolean(body: Record<string, unknown>, key: string, fallback: boolean): boolean {
  const value = body[key]
  if (value === undefined || value === null) return fallback
  if (typeof value !== 'boolean') throw badRequest(`'${key}' must be a boolean`, key)
  return value
}

export function readInteger(body: Record<string, unknown>, key: string, options: { min?: number; max?: number } = {}): number | null {
  const value = body[key]
  if (value === undefined || value === null) return null
  if (typeof value !== 'number' || !Number.isInteger(value)) {
    throw badRequest(`'${key}' must be an integer`, key)
  }
  if (options.min !== undefined && value < options.min) {
    throw badRequest(`'${key}' must be at least ${options.min}, got ${value}.`, key)
  }
  if (options.max !== undefined && value > options.max) {
    throw badRequest(`'${key}' must be at most ${options.max}, got ${value}.`, key)
  }
  return value
}

export function readSamplingFields(body: Record<string, unknown>): SamplingFields {
  const streamOptions = body.stream_options
  if (streamOptions !== undefined && streamOptions !== null && !isRecord(streamOptions)) {
    throw badRequest("'stream_options' must be an object", 'stream_options')
  }
  const stream = readBoolean(body, 'stream', false)
  if (streamOptions && !stream) {
    throw badRequest('Stream options can only be defined when `stream=True`.', 'stream_options')
  }
  const maxTokens = readInteger(body, 'max_completion_tokens', { min: 1 }) ?? readInteger(body, 'max_tokens', { min: 1 })
  return {
    stream,
    includeUsage: streamOptions ? streamOptions.include_usage === true : false,
    continuousUsage: streamOptions ? streamOptions.continuous_usage_stats === true : false,
    n: readInteger(body, 'n', { min: 1, max: 128 }) ?? 1,
    maxTokens,
    stop: readStop(body.stop),
    stopTokenIds: readIntegerList(body, 'stop_token_ids'),
    includeStopStrInOutput: readBoolean(body, 'include_stop_str_in_output', false),
    skipSpecialTokens: readBoolean(body, 'skip_special_tokens', true),
    returnTokenIds: readBoolean(body, 'return_token_ids', false),
    returnTokensAsTokenIds: readBoolean(body, 'return_tokens_as_token_ids', false),
    seed: readInteger(body, 'seed'),
  }
}

function readStop(value: unknown): string[] {
  if (value === undefined || value === null) return []
  if (typeof value === 'string') return value === '' ? [] : [value]
  if (Array.isArray(value) && value.every((entry) => typeof entry === 'string')) {
    return value.filter((entry) => entry !== '')
  }
  throw badRequest("'stop' must be a string or a list of strings", 'stop')
}

function readIntegerList(body: Record<string, unknown>, key: string): number[] {
  const value = body[key]
  if (value === undefined || value === null) return []
  if (Array.isArray(value) && value.every((entry) => Number.isInteger(entry))) return value as number[]
  throw badRequest(`'${key}' must be a list of integers`, key)
}
