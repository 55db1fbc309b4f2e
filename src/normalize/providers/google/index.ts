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

const GENERATE_PATH = /\/models\/[^/:]+:(generateContent|streamGenerateContent|countTokens)\/?$/
const COUNT_TOKENS_PATH = /\/models\/[^/:]+:countTokens\/?$/
/** The model list and model get, so their failures render in Google's shape. */
const MODELS_PATH = /\/v1(beta|alpha)?\/models(\/[^/:]+)?\/?$/

export const google: ProviderAdapter = {
  id: 'google',
  matches: (url, headers) =>
    GENERATE_PATH.test(url.pathname) ||
    (MODELS_PATH.test(url.pathname) && (url.pathname.includes('/v1beta/') || headers.has('x-goog-api-key'))),
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
