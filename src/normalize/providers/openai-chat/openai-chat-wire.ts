/**
 * @module
 * OpenAI chat-completions request schema: limited and lenient. It checks what the gateway reads and
 * lets everything else through untouched (habit 4: validate what you read, forward what you didn't).
 */
import { z } from 'zod'

const CHAT_ROLES = ['system', 'developer', 'user', 'assistant', 'tool', 'function'] as const

const contentSchema = z.union([z.string(), z.array(z.looseObject({ type: z.string() })), z.null()])

export const openaiChatMessageSchema = z.looseObject({
  role: z.enum(CHAT_ROLES),
  content: contentSchema.optional(),
  tool_calls: z
    .array(
      z.looseObject({
        id: z.string().optional(),
        type: z.string().optional(),
        function: z.looseObject({ name: z.string(), arguments: z.union([z.string(), z.record(z.string(), z.unknown())]) }),
      }),
    )
    .nullish(),
  tool_call_id: z.string().nullish(),
})

export const openaiChatToolSchema = z.looseObject({
  type: z.literal('function'),
  function: z.looseObject({
    name: z.string().min(1),
    description: z.string().nullish(),
    parameters: z.record(z.string(), z.unknown()).nullish(),
  }),
})

export const openaiChatRequestSchema = z.looseObject({
  model: z.string().min(1),
  messages: z.array(openaiChatMessageSchema).min(1),
  tools: z.array(openaiChatToolSchema).nullish(),
  stream: z.boolean().nullish(),
  stream_options: z.looseObject({ include_usage: z.boolean().nullish() }).nullish(),
  n: z.number().int().min(1).max(1, 'n > 1 is not supported: only one sample per call is captured').nullish(),
  max_tokens: z.number().int().positive().nullish(),
  max_completion_tokens: z.number().int().positive().nullish(),
  temperature: z.number().min(0).max(2).nullish(),
  top_p: z.number().min(0).max(1).nullish(),
  stop: z.union([z.string(), z.array(z.string())]).nullish(),
  logprobs: z.boolean().nullish(),
  top_logprobs: z.number().int().min(0).max(20).nullish(),
})
export type OpenaiChatRequest = z.infer<typeof openaiChatRequestSchema>
