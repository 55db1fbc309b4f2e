/**
 * @module
 * Gemini `generateContent` request schemas: limited and lenient. Proto JSON accepts both lowerCamel and
 * snake_case field names; the known structural keys are renamed to lowerCamel before validation
 * (never inside `args`, `response` or schemas, which are user data).
 * @see https://ai.google.dev/api/generate-content
 */
import { z } from 'zod'
import { parseOrThrow } from '../../zod-issues.ts'

type Json = Record<string, unknown>

const isObject = (value: unknown): value is Json => value !== null && typeof value === 'object' && !Array.isArray(value)

function renamed(aliases: Record<string, string>) {
  return (value: unknown) => {
    if (!isObject(value)) return value
    let out: Json | null = null
    for (const [snake, camel] of Object.entries(aliases)) {
      if (snake in value && !(camel in value)) {
        out ??= { ...value }
        out[camel] = out[snake]
        delete out[snake]
      }
    }
    return out ?? value
  }
}

const blobSchema = z.preprocess(renamed({ mime_type: 'mimeType' }), z.looseObject({ mimeType: z.string().min(1), data: z.string() }))
const fileDataSchema = z.preprocess(
  renamed({ mime_type: 'mimeType', file_uri: 'fileUri' }),
  z.looseObject({ mimeType: z.string().nullish(), fileUri: z.string().min(1) }),
)

const PART_DATA_KEYS = [
  'text',
  'inlineData',
  'fileData',
  'functionCall',
  'functionResponse',
  'executableCode',
  'codeExecutionResult',
  'thoughtSignature',
] as const

export const googlePartSchema = z.preprocess(
  renamed({
    inline_data: 'inlineData',
    file_data: 'fileData',
    function_call: 'functionCall',
    function_response: 'functionResponse',
    executable_code: 'executableCode',
    code_execution_result: 'codeExecutionResult',
    thought_signature: 'thoughtSignature',
  }),
  z
    .looseObject({
      text: z.string().nullish(),
      thought: z.boolean().nullish(),
      thoughtSignature: z.string().nullish(),
      inlineData: blobSchema.nullish(),
      fileData: fileDataSchema.nullish(),
      functionCall: z
        .looseObject({ id: z.string().nullish(), name: z.string().min(1), args: z.record(z.string(), z.unknown()).nullish() })
        .nullish(),
      functionResponse: z
        .looseObject({
          id: z.string().nullish(),
          name: z.string().min(1),
          response: z.record(z.string(), z.unknown()).nullish(),
          parts: z.array(z.looseObject({ inlineData: blobSchema.nullish(), fileData: fileDataSchema.nullish() })).nullish(),
        })
        .nullish(),
      executableCode: z.unknown().optional(),
      codeExecutionResult: z.unknown().optional(),
    })
    .refine((part) => PART_DATA_KEYS.some((key) => part[key] != null), {
      message: `a part needs one of ${PART_DATA_KEYS.join(', ')}`,
    }),
)
export type GooglePart = z.infer<typeof googlePartSchema>

export const GOOGLE_ROLES = ['user', 'model', 'function'] as const

export const googleContentSchema = z.looseObject({
  role: z.enum(GOOGLE_ROLES).nullish(),
  parts: z.array(googlePartSchema),
})
export type GoogleContent = z.infer<typeof googleContentSchema>

const systemInstructionSchema = z.union([
  z.string(),
  z.looseObject({ role: z.string().nullish(), parts: z.array(z.looseObject({ text: z.string().nullish() })) }),
])

export const googleFunctionDeclarationSchema = z.looseObject({
  name: z.string().min(1),
  description: z.string().nullish(),
  parameters: z.record(z.string(), z.unknown()).nullish(),
  parametersJsonSchema: z.record(z.string(), z.unknown()).nullish(),
})

export const googleToolSchema = z.preprocess(
  renamed({ function_declarations: 'functionDeclarations' }),
  z.looseObject({ functionDeclarations: z.array(googleFunctionDeclarationSchema).nullish() }),
)
export type GoogleTool = z.infer<typeof googleToolSchema>

const toolConfigSchema = z.preprocess(
  renamed({ function_calling_config: 'functionCallingConfig' }),
  z.looseObject({
    functionCallingConfig: z
      .preprocess(
        renamed({ allowed_function_names: 'allowedFunctionNames' }),
        z.looseObject({
          mode: z.enum(['MODE_UNSPECIFIED', 'AUTO', 'ANY', 'NONE', 'VALIDATED']).nullish(),
          allowedFunctionNames: z.array(z.string()).nullish(),
        }),
      )
      .nullish(),
  }),
)

export const googleGenerationConfigSchema = z.preprocess(
  renamed({
    max_output_tokens: 'maxOutputTokens',
    top_p: 'topP',
    top_k: 'topK',
    stop_sequences: 'stopSequences',
    candidate_count: 'candidateCount',
    presence_penalty: 'presencePenalty',
    frequency_penalty: 'frequencyPenalty',
    response_mime_type: 'responseMimeType',
    response_schema: 'responseSchema',
    response_json_schema: 'responseJsonSchema',
    thinking_config: 'thinkingConfig',
  }),
  z.looseObject({
    maxOutputTokens: z.number().int().positive().nullish(),
    temperature: z.number().min(0).max(2).nullish(),
    topP: z.number().min(0).max(1).nullish(),
    topK: z.number().int().min(0).nullish(),
    seed: z.number().int().nullish(),
    stopSequences: z.array(z.string()).nullish(),
    candidateCount: z.number().int().min(1).max(1, 'candidateCount > 1 is not supported: only one sample per call is captured').nullish(),
    presencePenalty: z.number().nullish(),
    frequencyPenalty: z.number().nullish(),
    responseMimeType: z.string().nullish(),
    responseSchema: z.record(z.string(), z.unknown()).nullish(),
    responseJsonSchema: z.record(z.string(), z.unknown()).nullish(),
    _responseJsonSchema: z.record(z.string(), z.unknown()).nullish(),
    thinkingConfig: z
      .preprocess(
        renamed({ include_thoughts: 'includeThoughts', thinking_budget: 'thinkingBudget', thinking_level: 'thinkingLevel' }),
        z.looseObject({
          includeThoughts: z.boolean().nullish(),
          thinkingBudget: z.number().int().nullish(),
          thinkingLevel: z.string().nullish(),
        }),
      )
      .nullish(),
  }),
)

const requestShape = {
  contents: z.array(googleContentSchema),
  systemInstruction: systemInstructionSchema.nullish(),
  tools: z.array(googleToolSchema).nullish(),
  toolConfig: toolConfigSchema.nullish(),
  generationConfig: googleGenerationConfigSchema.nullish(),
  cachedContent: z.string().nullish(),
}

const TOP_LEVEL_ALIASES = {
  system_instruction: 'systemInstruction',
  tool_config: 'toolConfig',
  generation_config: 'generationConfig',
  cached_content: 'cachedContent',
  safety_settings: 'safetySettings',
  generate_content_request: 'generateContentRequest',
}

export const googleRequestSchema = z.preprocess(
  renamed(TOP_LEVEL_ALIASES),
  z.looseObject({ ...requestShape, contents: requestShape.contents.min(1) }),
)
export type GoogleRequest = z.infer<typeof googleRequestSchema>

/** `:countTokens` takes `contents` alone or a whole `generateContentRequest`. */
export const googleCountTokensSchema = z.preprocess(
  renamed(TOP_LEVEL_ALIASES),
  z.looseObject({
    contents: z.array(googleContentSchema).nullish(),
    generateContentRequest: z.preprocess(renamed(TOP_LEVEL_ALIASES), z.looseObject(requestShape)).nullish(),
  }),
)

/** Wire parsing for this provider: the shared deepest-field validation. */
export const parseGoogleWire = parseOrThrow
