/**
 * @module
 * Errors in OpenAI's shape: `{ error: { message, type, param, code } }` with the HTTP status kept.
 */
import { buildOpenaiError } from '../../openai-error.ts'

export const buildOpenaiChatError = buildOpenaiError
