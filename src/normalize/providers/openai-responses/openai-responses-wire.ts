/**
 * @module
 * OpenAI Responses request schemas: limited and lenient. Input items are a union on `type`; items with a
 * `role` and no `type` are messages (opencode and pi send them that way).
 * @see https://platform.openai.com/docs/api-reference/responses/create
 */
import { z } from 'zod'
import { parseOrThrow } from '../../zod-issues.ts'

const textPart = (type: 'input_text' | 'output_text' | 'text') => z.looseObject({ type: z.literal(type), text: z.string() })

const inputImagePart = z.looseObject({
  type: z.literal('input_image'),
  image_url: z.string().nullish(),
  file_id: z.string().nullish(),
  detail: z.string().nullish(),
})

const inputFilePart = z.looseObject({
  type: z.literal('input_file'),
  filename: z.string().nullish(),
  file_data: z.string().nullish(),
  file_id: z.string().nullish(),
  file_url: z.string().nullish(),
})

const refusalPart = z.looseObject({ type: z.literal('refusal'), refusal: z.string() })

export const responsesContentPartSchema = z.discriminatedUnion('type', [
  textPart('input_text'),
  textPart('output_text'),
  textPart('text'),
  inputImagePart,
  inputFilePart,
  refusalPart,
])
export type ResponsesContentPart = z.infer<typeof responsesContentPartSchema>

export const RESPONSES_ROLES = ['user', 'assistant', 'system', 'developer'] as const

const messageItem = z.looseObject({
  type: z.literal('message'),
  role: z.enum(RESPONSES_ROLES),
  content: z.union([z.string(), z.array(responsesContentPartSchema)]),
  id: z.string().nullish(),
  status: z.string().nullish(),
})

const toolOutput = z.union([z.string(), z.array(responsesContentPartSchema)])

const functionCallItem = z.looseObject({
  type: z.literal('function_call'),
  call_id: z.string().min(1),
  name: z.string().min(1),
  arguments: z.string(),
  id: z.string().nullish(),
})

const functionCallOutputItem = z.looseObject({
  type: z.literal('function_call_output'),
  call_id: z.string().min(1),
  output: toolOutput,
})

const customToolCallItem = z.looseObject({
  type: z.literal('custom_tool_call'),
  call_id: z.string().min(1),
  name: z.string().min(1),
  input: z.string(),
  id: z.string().nullish(),
})

const customToolCallOutputItem = z.looseObject({
  type: z.literal('custom_tool_call_output'),
  call_id: z.string().min(1),
  output: toolOutput,
})

const reasoningItem = z.looseObject({
  type: z.literal('reasoning'),
  id: z.string().nullish(),
  summary: z.array(z.looseObject({ type: z.string(), text: z.string() })).nullish(),
  content: z.array(z.looseObject({ type: z.string(), text: z.string() })).nullish(),
  encrypted_content: z.string().nullish(),
})

const itemReference = z.looseObject({ type: z.literal('item_reference'), id: z.string() })

/**
 * Calls and results of OpenAI-hosted tools: they can only come from history produced by the real API,
 * the engine never ran them, so they are dropped with a warning.
 */
export const HOSTED_ITEM_TYPES = [
  'web_search_call',
  'file_search_call',
  'computer_call',
  'computer_call_output',
  'code_interpreter_call',
  'image_generation_call',
  'local_shell_call',
  'local_shell_call_output',
  'shell_call',
  'shell_call_output',
  'apply_patch_call',
  'apply_patch_call_output',
  'mcp_call',
  'mcp_list_tools',
  'mcp_approval_request',
  'mcp_approval_response',
  'tool_search_call',
  'tool_search_output',
  'compaction',
] as const

const hostedItem = z.looseObject({ type: z.enum(HOSTED_ITEM_TYPES) })

const bareInputText = textPart('input_text')

export const responsesInputItemSchema = z.preprocess(
  (item) =>
    item !== null && typeof item === 'object' && !Array.isArray(item) && !('type' in item) && 'role' in item
      ? { ...item, type: 'message' }
      : item,
  z.discriminatedUnion('type', [
    messageItem,
    functionCallItem,
    functionCallOutputItem,
    customToolCallItem,
    customToolCallOutputItem,
    reasoningItem,
    itemReference,
    hostedItem,
    bareInputText,
    inputImagePart,
  ]),
)
export type ResponsesInputItem = z.infer<typeof responsesInputItemSchema>

export const responsesToolSchema = z.looseObject({
  type: z.string().min(1),
  name: z.string().nullish(),
  description: z.string().nullish(),
  parameters: z.record(z.string(), z.unknown()).nullish(),
  format: z.looseObject({ type: z.string(), syntax: z.string().nullish(), definition: z.string().nullish() }).nullish(),
  function: z
    .looseObject({
      name: z.string().min(1),
      description: z.string().nullish(),
      parameters: z.record(z.string(), z.unknown()).nullish(),
    })
    .nullish(),
})
export type ResponsesTool = z.infer<typeof responsesToolSchema>

export const responsesToolChoiceSchema = z.union([
  z.enum(['auto', 'none', 'required']),
  z.looseObject({
    type: z.string(),
    name: z.string().nullish(),
    mode: z.string().nullish(),
    function: z.looseObject({ name: z.string() }).nullish(),
  }),
])

const textFormatSchema = z.discriminatedUnion('type', [
  z.looseObject({ type: z.literal('text') }),
  z.looseObject({ type: z.literal('json_object') }),
  z.looseObject({
    type: z.literal('json_schema'),
    name: z.string().nullish(),
    schema: z.record(z.string(), z.unknown()),
    description: z.string().nullish(),
    strict: z.boolean().nullish(),
  }),
])

export const responsesRequestSchema = z.looseObject({
  model: z.string().min(1),
  input: z.union([z.string(), z.array(responsesInputItemSchema)]),
  instructions: z.string().nullish(),
  tools: z.array(responsesToolSchema).nullish(),
  tool_choice: responsesToolChoiceSchema.nullish(),
  parallel_tool_calls: z.boolean().nullish(),
  max_output_tokens: z.number().int().positive().nullish(),
  temperature: z.number().min(0).max(2).nullish(),
  top_p: z.number().min(0).max(1).nullish(),
  stream: z.boolean().nullish(),
  store: z.boolean().nullish(),
  include: z.array(z.string()).nullish(),
  reasoning: z.looseObject({ effort: z.string().nullish(), summary: z.string().nullish() }).nullish(),
  text: z.looseObject({ format: textFormatSchema.nullish(), verbosity: z.string().nullish() }).nullish(),
  previous_response_id: z.string().nullish(),
  conversation: z.unknown().optional(),
  background: z.boolean().nullish(),
  metadata: z.record(z.string(), z.unknown()).nullish(),
  truncation: z.string().nullish(),
})
export type ResponsesRequest = z.infer<typeof responsesRequestSchema>

/** Wire parsing for this provider: the shared deepest-field validation. */
export const parseResponsesWire = parseOrThrow
