/**
 * @module
 * OpenAI Responses adapter (`POST /v1/responses`): Codex CLI (Responses only), opencode with
 * `@ai-sdk/openai`, pi `openai-responses`, and the `openai` SDK's `responses` API.
 */
import type { ProviderAdapter } from '../../adapter.ts'
import { buildResponsesError } from './openai-responses-error.ts'
import { parseResponsesRequest } from './openai-responses-request.ts'
import { buildResponsesResponse } from './openai-responses-response.ts'
import { createResponsesStreamEncoder } from './openai-responses-stream.ts'

export { type PriorResponseTurn, previousResponseCompletionId, resolvePreviousResponse } from './openai-responses-previous-response.ts'

const RESPONSES_PATH = /\/v1\/responses\/?$/

export const openaiResponses: ProviderAdapter = {
  id: 'openai-responses',
  matches: (url) => RESPONSES_PATH.test(url.pathname),
  parseRequest: (body) => parseResponsesRequest(body),
  buildResponse: buildResponsesResponse,
  createStreamEncoder: createResponsesStreamEncoder,
  buildError: buildResponsesError,
}
