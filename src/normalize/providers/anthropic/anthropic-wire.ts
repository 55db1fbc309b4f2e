/**
 * @module
 * Anthropic Messages request schemas: limited and lenient (`looseObject` everywhere). They check what
 * the gateway reads — roles, block types, tool shapes — and let every other field through untouched.
 * @see https://docs.anthropic.com/en/api/messages
 */
import { z } from 'zod'
import { parseOrThrow } from '../../zod-issues.ts'

const cacheControlSchema = z.looseObject({ type: z.string() }).nullish()

export const anthropicTextBlockSchema = z.looseObject({
  type: z.literal('text'),
  text: z.string(),
  cache_control: cacheControlSchema,
})

const imageSourceSchema = z.discriminatedUnion('type', [
  z.looseObject({ type: z.literal('base64'), media_type: z.string().min(1), data: z.string().min(1) }),
  z.looseObject({ type: z.literal('url'), url: z.string().min(1) }),
  z.looseObject({ type: z.literal('file'), file_id: z.string().min(1) }),
])

export const anthropicImageBlockSchema = z.looseObject({
  type: z.literal('image'),
  source: imageSourceSchema,
  cache_control: cacheControlSchema,
})

export const anthropicDocumentBlockSchema = z.looseObject({
  type: z.literal('document'),
  source: z.looseObject({ type: z.string(), media_type: z.string().nullish(), data: z.unknown().optional() }),
  title: z.string().nullish(),
  context: z.string().nullish(),
})

const searchResultBlockSchema = z.looseObject({
  type: z.literal('search_result'),
  source: z.string().nullish(),
  title: z.string().nullish(),
  content: z.array(anthropicTextBlockSchema),
})

export const anthropicToolResultBlockSchema = z.looseObject({
  type: z.literal('tool_result'),
  tool_use_id: z.string().min(1),
  content: z
    .union([
      z.string(),
      z.array(
        z.discriminatedUnion('type', [
          anthropicTextBlockSchema,
          anthropicImageBlockSchema,
          anthropicDocumentBlockSchema,
          searchResultBlockSchema,
        ]),
      ),
    ])
    .nullish(),
  is_error: z.boolean().nullish(),
})

export const anthropicToolUseBlockSchema = z.looseObject({
  type: z.literal('tool_use'),
  id: z.string().min(1),
  name: z.string().min(1),
  input: z.record(z.string(), z.unknown()),
})

export const anthropicThinkingBlockSchema = z.looseObject({
  type: z.literal('thinking'),
  thinking: z.string(),
  signature: z.string().nullish(),
})

export const anthropicRedactedThinkingBlockSchema = z.looseObject({
  type: z.literal('redacted_thinking'),
  data: z.string(),
})

/**
 * Blocks produced by Anthropic-run server tools. They can only appear in history copied from the real
 * API; the engine never ran them, so they are dropped with a warning.
 */
export const ANTHROPIC_SERVER_BLOCK_TYPES = [
  'server_tool_use',
  'web_search_tool_result',
  'web_fetch_tool_result',
  'code_execution_tool_result',
  'bash_code_execution_tool_result',
  'text_editor_code_execution_tool_result',
  'tool_search_tool_result',
  'mcp_tool_use',
  'mcp_tool_result',
  'container_upload',
] as const

const serverBlockSchema = z.looseObject({ type: z.enum(ANTHROPIC_SERVER_BLOCK_TYPES) })

export const anthropicContentBlockSchema = z.discriminatedUnion('type', [
  anthropicTextBlockSchema,
  anthropicImageBlockSchema,
  anthropicDocumentBlockSchema,
  searchResultBlockSchema,
  anthropicToolUseBlockSchema,
  anthropicToolResultBlockSchema,
  anthropicThinkingBlockSchema,
  anthropicRedactedThinkingBlockSchema,
  serverBlockSchema,
])
export type AnthropicContentBlock = z.infer<typeof anthropicContentBlockSchema>

/**
 * `system` inside `messages` is Claude Code's mid-conversation system beta
 * (`mid-conversation-system-2026-04-07`); `ctx` / `msg` are roles Claude Code ≥2.1.154 sends (vLLM maps
 * both to `user`).
 */
export const ANTHROPIC_ROLES = ['user', 'assistant', 'system', 'ctx', 'msg'] as const

export const anthropicMessageSchema = z.looseObject({
  role: z.enum(ANTHROPIC_ROLES),
  content: z.union([z.string(), z.array(anthropicContentBlockSchema)]),
})
export type AnthropicMessage = z.infer<typeof anthropicMessageSchema>

export const anthropicToolSchema = z.looseObject({
  type: z.string().nullish(),
  name: z.string().min(1),
  description: z.string().nullish(),
  input_schema: z.record(z.string(), z.unknown()).nullish(),
})
export type AnthropicTool = z.infer<typeof anthropicToolSchema>

export const anthropicToolChoiceSchema = z.discriminatedUnion('type', [
  z.looseObject({ type: z.literal('auto'), disable_parallel_tool_use: z.boolean().nullish() }),
  z.looseObject({ type: z.literal('any'), disable_parallel_tool_use: z.boolean().nullish() }),
  z.looseObject({ type: z.literal('tool'), name: z.string().min(1), disable_parallel_tool_use: z.boolean().nullish() }),
  z.looseObject({ type: z.literal('none') }),
])

const jsonSchemaFormatSchema = z.looseObject({
  type: z.literal('json_schema'),
  schema: z.record(z.string(), z.unknown()),
  name: z.string().nullish(),
})

/** Fields shared by `POST /v1/messages` and `POST /v1/messages/count_tokens`. */
const anthropicPromptShape = {
  model: z.string().min(1),
  messages: z.array(anthropicMessageSchema).min(1),
  system: z.union([z.string(), z.array(anthropicTextBlockSchema)]).nullish(),
  tools: z.array(anthropicToolSchema).nullish(),
  tool_choice: anthropicToolChoiceSchema.nullish(),
  thinking: z.looseObject({ type: z.enum(['enabled', 'disabled', 'adaptive']), budget_tokens: z.number().int().nullish() }).nullish(),
  output_config: z.looseObject({ effort: z.string().nullish(), format: jsonSchemaFormatSchema.nullish() }).nullish(),
  /** Pre-GA structured outputs (`structured-outputs-2025-11-13` beta). */
  output_format: jsonSchemaFormatSchema.nullish(),
}

export const anthropicRequestSchema = z.looseObject({
  ...anthropicPromptShape,
  max_tokens: z.number().int().positive(),
  stop_sequences: z.array(z.string()).nullish(),
  stream: z.boolean().nullish(),
  temperature: z.number().min(0).max(1).nullish(),
  top_p: z.number().min(0).max(1).nullish(),
  top_k: z.number().int().min(0).nullish(),
  metadata: z.looseObject({}).nullish(),
  mcp_servers: z.array(z.unknown()).nullish(),
})
export type AnthropicRequest = z.infer<typeof anthropicRequestSchema>

export const anthropicCountTokensSchema = z.looseObject(anthropicPromptShape)
export type AnthropicCountTokensRequest = z.infer<typeof anthropicCountTokensSchema>

/** Wire parsing for this provider: the shared deepest-field validation. */
export const parseAnthropicWire = parseOrThrow
