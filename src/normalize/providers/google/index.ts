/**
 * @module
 * Gemini API adapter (`POST /v1beta/models/{model}:generateContent`, `:streamGenerateContent?alt=sse`,
 * `:countTokens`): Gemini CLI, qwen-code / opencode / pi in Gemini mode, and `@google/genai`.
 */
import type { ProviderAdapter } from '../../adapter.ts'
import { buildGoogleError } from './google-error.ts'
import { parseGoogleCountTokensRequest, parseGoogleRequest } from './google-request.ts'
import { buildGoogleResponse } from './google-response.ts'
import { createGoogleStreamEncoder } from './google-stream.ts'

/**
 * Any Gemini method path, `…/models/{model}:{method}`: the model may contain `/` (served ids such as
 * `Qwen/Qwen3-8B`, listed as `models/Qwen/Qwen3-8B`), raw or as `%2F`. Unknown methods are this adapter's
 * too, so their 404 is in Google's shape.
 */
const METHOD_PATH = /\/models\/[^:]+:[A-Za-z]+\/?$/
const COUNT_TOKENS_PATH = /\/models\/[^:]+:countTokens\/?$/
/** The model list and model get, so their failures render in Google's shape. */
const MODELS_PATH = /\/v1(beta|alpha)?\/models(\/[^:]+)?\/?$/

/** A Google client: its key rides in `x-goog-api-key` or `?key=` (Google REST). */
export function isGoogleClient(url: URL, headers: Headers): boolean {
  return headers.has('x-goog-api-key') || url.searchParams.has('key')
}

export const google: ProviderAdapter = {
  id: 'google',
  matches: (url, headers) =>
    METHOD_PATH.test(url.pathname) ||
    (MODELS_PATH.test(url.pathname) && (/\/v1(beta|alpha)\//.test(url.pathname) || isGoogleClient(url, headers))),
  parseRequest: parseGoogleRequest,
  buildResponse: buildGoogleResponse,
  createStreamEncoder: createGoogleStreamEncoder,
  buildError: buildGoogleError,
  countTokens: {
    matches: (url) => COUNT_TOKENS_PATH.test(url.pathname),
    parseRequest: parseGoogleCountTokensRequest,
    buildResponse: (inputTokens) => ({ totalTokens: inputTokens }),
  },
}
