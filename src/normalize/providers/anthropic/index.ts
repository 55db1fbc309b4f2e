/**
 * @module
 * Anthropic Messages adapter (`POST /v1/messages`, `?beta=true` accepted; `POST /v1/messages/count_tokens`):
 * Claude Code, qwen-code and opencode / pi in Anthropic mode, and the `@anthropic-ai/sdk`.
 */
import type { ProviderAdapter } from '../../adapter.ts'
import { buildAnthropicError } from './anthropic-error.ts'
import { parseAnthropicCountTokensRequest, parseAnthropicRequest } from './anthropic-request.ts'
import { buildAnthropicResponse } from './anthropic-response.ts'
import { createAnthropicStreamEncoder } from './anthropic-stream.ts'

const MESSAGES_PATH = /\/v1\/messages(\/count_tokens)?\/?$/
const COUNT_TOKENS_PATH = /\/v1\/messages\/count_tokens\/?$/
/** Header tie-break only for paths no API claims by path (e.g. Claude Code's `GET /v1/models`). */
const MODELS_PATH = /\/v1\/models\/?$/

export const anthropic: ProviderAdapter = {
  id: 'anthropic',
  matches: (url, headers) => MESSAGES_PATH.test(url.pathname) || (MODELS_PATH.test(url.pathname) && headers.has('anthropic-version')),
  parseRequest: (body) => parseAnthropicRequest(body),
  buildResponse: buildAnthropicResponse,
  createStreamEncoder: createAnthropicStreamEncoder,
  buildError: buildAnthropicError,
  countTokens: {
    matches: (url) => COUNT_TOKENS_PATH.test(url.pathname),
    parseRequest: (body) => parseAnthropicCountTokensRequest(body),
    buildResponse: (inputTokens) => ({ input_tokens: inputTokens }),
  },
}

export {
  restoredToolInputWarning,
  restoreSampledToolInputs,
  type ToolInputRestore,
  toolInputRestoreCandidates,
} from './anthropic-tool-input-restore.ts'
