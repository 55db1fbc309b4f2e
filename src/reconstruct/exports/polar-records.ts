/**
 * @module
 * Completion records in Polar's `CompletionRecord` shape (`polar/trajectory/models.py`, §15), both
 * ways, so Polar's builders can read what Rollgate captured and Rollgate's builders can read what a
 * Polar gateway (or its on-disk dump) captured.
 *
 * Rollgate → Polar (`toPolarCompletionRecord`): the token data goes where Polar's
 * `build_trace_from_completion` looks for it, as a vLLM-shaped normalized response:
 * `response = {id, object, model, prompt_token_ids, choices: [{index, message, finish_reason,
 * stop_reason, token_ids, logprobs: {content: [{token, token_id, logprob, bytes, top_logprobs}]}}],
 * usage}`; `api_type` uses Polar's names (`openai_chat`, …). `token` is `token_id:<id>` (vLLM's
 * `return_tokens_as_token_ids` spelling: the edge keeps ids, not token text). Everything Polar has
 * no field for rides in the extra key `rollgate` (Polar's model is `extra="allow"`), so the
 * conversion back is lossless. Logprobs that do not align with the sampled ids are left out
 * (`logprobs: null`), as Polar's rule would ignore them anyway.
 *
 * Polar → Rollgate (`fromPolarCompletionRecords`): Polar's extraction rules (§16.1): prompt ids from
 * `choice.input_token_ids || choice.prompt_token_ids || response.prompt_token_ids`, sampled ids from
 * `choice.token_ids ?? response.token_ids`, logprobs only when aligned (`logprobs.content[].token_id`
 * or SGLang `meta_info.output_token_logprobs`), else recovered with the ids from the first complete
 * paired source. Records without the `rollgate` key get `seq` from Polar's order
 * `(timestamp, completion_id)`, agent `main`, status `ok`.
 */
import { z } from 'zod'
import { type ApiId, apiIdSchema, type CompletionRecord, completionRecordSchema, POLAR_API_TYPE } from '../../contract/completion-record.ts'

type JsonObject = Record<string, unknown>

/** Rollgate fields Polar has no place for, kept under the record's extra key `rollgate`. */
export interface PolarRecordExtension {
  seq: number
  api: ApiId
  agent: string
  stream: boolean
  status: CompletionRecord['status']
  trainable: boolean
  prompt_delta: CompletionRecord['prompt_delta']
  /** The record's logprobs when they could not be put in `logprobs.content` (not aligned). */
  response_logprobs: number[] | null
  warnings: CompletionRecord['warnings']
  error: string | null
  timing: CompletionRecord['timing']
  provenance: CompletionRecord['provenance']
}

export interface PolarCompletionRecord {
  completion_id: string
  timestamp: string
  session_id: string
  task_id: string | null
  api_type: string
  model_requested: string
  model_used: string
  request: JsonObject
  original_request: unknown
  response: JsonObject
  metadata: JsonObject
  rollgate: PolarRecordExtension
}

function aligned(record: CompletionRecord): boolean {
  const logprobs = record.response_logprobs
  return logprobs !== null && logprobs.length === record.response_token_ids.length && logprobs.every((v) => Number.isFinite(v))
}

export function toPolarCompletionRecord(record: CompletionRecord): PolarCompletionRecord {
  const isAligned = aligned(record)
  const logprobs = record.response_logprobs
  const choice: JsonObject = {
    index: 0,
    message: record.response_message,
    finish_reason: record.finish_reason,
    stop_reason: record.stop_reason,
    token_ids: record.response_token_ids,
    logprobs:
      isAligned && logprobs !== null
        ? {
            content: record.response_token_ids.map((tokenId, i) => ({
              token: `token_id:${tokenId}`,
              token_id: tokenId,
              logprob: logprobs[i],
              bytes: [],
              top_logprobs: [],
            })),
          }
        : null,
  }
  const taskId = record.metadata.task_id
  return {
    completion_id: record.completion_id,
    timestamp: record.timestamp,
    session_id: record.session_id,
    task_id: typeof taskId === 'string' ? taskId : null,
    api_type: POLAR_API_TYPE[record.api],
    model_requested: record.model_requested,
    model_used: record.model_used,
    request: record.request,
    original_request: record.original_request,
    response: {
      id: record.completion_id,
      object: 'chat.completion',
      model: record.model_used,
      prompt_token_ids: record.prompt_token_ids,
      choices: [choice],
      usage: record.usage,
    },
    metadata: record.metadata,
    rollgate: {
      seq: record.seq,
      api: record.api,
      agent: record.agent,
      stream: record.stream,
      status: record.status,
      trainable: record.trainable,
      prompt_delta: record.prompt_delta,
      response_logprobs: isAligned ? null : logprobs,
      warnings: record.warnings,
      error: record.error,
      timing: record.timing,
      provenance: record.provenance,
    },
  }
}

// ---------------------------------------------------------------------------------------------
// Polar → Rollgate
// ---------------------------------------------------------------------------------------------

const ints = z.array(z.number().int())
const logprobEntrySchema = z.looseObject({ token_id: z.number().int().optional(), logprob: z.number().nullable().optional() })
const choiceSchema = z.looseObject({
  message: z.record(z.string(), z.unknown()).nullable().optional(),
  finish_reason: z.string().nullable().optional(),
  stop_reason: z.union([z.string(), z.number()]).nullable().optional(),
  input_token_ids: ints.nullable().optional(),
  prompt_token_ids: ints.nullable().optional(),
  token_ids: ints.nullable().optional(),
  logprobs: z
    .looseObject({ content: z.array(logprobEntrySchema).nullable().optional() })
    .nullable()
    .optional(),
  meta_info: z
    .looseObject({ output_token_logprobs: z.array(z.array(z.unknown())).optional() })
    .nullable()
    .optional(),
})

/** Polar's `CompletionRecord` as a gateway serves it, or as its disk dump writes it (`transformed_request`). */
export const polarCompletionRecordSchema = z.looseObject({
  completion_id: z.string(),
  timestamp: z.string().nullable().optional(),
  session_id: z.string().optional(),
  task_id: z.string().nullable().optional(),
  api_type: z.string().nullable().optional(),
  model_requested: z.string().nullable().optional(),
  model_used: z.string().nullable().optional(),
  request: z.record(z.string(), z.unknown()).optional(),
  transformed_request: z.record(z.string(), z.unknown()).optional(),
  original_request: z.unknown().optional(),
  response: z.looseObject({
    model: z.string().optional(),
    prompt_token_ids: ints.nullable().optional(),
    token_ids: ints.nullable().optional(),
    choices: z.array(choiceSchema).optional(),
    usage: z.record(z.string(), z.unknown()).nullable().optional(),
  }),
  metadata: z.record(z.string(), z.unknown()).optional(),
  rollgate: z.unknown().optional(),
})
export type PolarCompletionRecordInput = z.infer<typeof polarCompletionRecordSchema>

const POLAR_TO_API: Record<string, ApiId> = Object.fromEntries(Object.entries(POLAR_API_TYPE).map(([api, polar]) => [polar, api as ApiId]))

/** A JSON document holds Polar-shaped records when its records carry a `response` object. */
export function isPolarRecord(value: unknown): boolean {
  return value !== null && typeof value === 'object' && 'response' in value && !('response_token_ids' in value)
}

/** Sampled ids and aligned logprobs by Polar's §16.1 rules. */
function tokensOf(response: PolarCompletionRecordInput['response']) {
  const choice = response.choices?.[0] ?? {}
  const prompt = choice.input_token_ids ?? choice.prompt_token_ids ?? response.prompt_token_ids ?? []
  const fromContent = (() => {
    const content = choice.logprobs?.content
    if (!content || content.length === 0) return null
    const ids: number[] = []
    const lps: number[] = []
    for (const entry of content) {
      if (entry.token_id === undefined || typeof entry.logprob !== 'number') return null
      ids.push(entry.token_id)
      lps.push(entry.logprob)
    }
    return { ids, lps }
  })()
  const fromMeta = (() => {
    const rows = choice.meta_info?.output_token_logprobs
    if (!rows || rows.length === 0) return null
    const ids: number[] = []
    const lps: number[] = []
    for (const row of rows) {
      const [lp, id] = row
      if (typeof lp !== 'number' || typeof id !== 'number') return null
      ids.push(id)
      lps.push(lp)
    }
    return { ids, lps }
  })()
  const sampled = choice.token_ids ?? response.token_ids ?? null
  const same = (a: readonly number[], b: readonly number[]) => a.length === b.length && a.every((v, i) => v === b[i])
  if (sampled !== null) {
    const source = [fromContent, fromMeta].find((s) => s !== null && same(s.ids, sampled)) ?? null
    return { prompt, ids: sampled, logprobs: source?.lps ?? null, choice }
  }
  const source = fromContent ?? fromMeta
  return { prompt, ids: source?.ids ?? [], logprobs: source?.lps ?? null, choice }
}

const extensionSchema = z.object({
  seq: z.number().int().nonnegative(),
  api: apiIdSchema,
  agent: z.string(),
  stream: z.boolean(),
  status: completionRecordSchema.shape.status,
  trainable: z.boolean(),
  prompt_delta: completionRecordSchema.shape.prompt_delta,
  response_logprobs: z.array(z.number()).nullable(),
  warnings: completionRecordSchema.shape.warnings,
  error: z.string().nullable(),
  timing: completionRecordSchema.shape.timing,
  provenance: completionRecordSchema.shape.provenance,
})

/** Polar-shaped records (one session) → Rollgate completion records, in Polar's order. */
export function fromPolarCompletionRecords(input: readonly unknown[], sessionId?: string): CompletionRecord[] {
  const parsed = input.map((value, index) => {
    const result = polarCompletionRecordSchema.safeParse(value)
    if (!result.success) throw new Error(`Polar record ${index}: ${result.error.issues[0]?.message ?? 'invalid'}`)
    return result.data
  })
  const ordered = [...parsed].sort((a, b) => {
    const ta = a.timestamp ?? ''
    const tb = b.timestamp ?? ''
    if (ta !== tb) return ta < tb ? -1 : 1
    return a.completion_id < b.completion_id ? -1 : a.completion_id > b.completion_id ? 1 : 0
  })
  return ordered.map((polar, index) => {
    const extension = polar.rollgate === undefined ? null : extensionSchema.parse(polar.rollgate)
    const { prompt, ids, logprobs, choice } = tokensOf(polar.response)
    const metadata = polar.metadata ?? {}
    const api = extension?.api ?? POLAR_TO_API[polar.api_type ?? ''] ?? 'openai-chat'
    const request = polar.request ?? polar.transformed_request ?? {}
    const message = choice.message ?? null
    const hasTokens = ids.length > 0 && prompt.length > 0
    const record: CompletionRecord = {
      completion_id: polar.completion_id,
      session_id: polar.session_id ?? sessionId ?? (typeof metadata.session_id === 'string' ? metadata.session_id : 'unknown-session'),
      seq: extension?.seq ?? index,
      timestamp: polar.timestamp ?? '',
      api,
      agent: extension?.agent ?? 'main',
      model_requested: polar.model_requested ?? (typeof request.model === 'string' ? request.model : 'unknown'),
      model_used: polar.model_used ?? polar.response.model ?? 'unknown',
      stream: extension?.stream ?? request.stream === true,
      status: extension?.status ?? 'ok',
      trainable: extension?.trainable ?? hasTokens,
      prompt_token_ids: prompt,
      prompt_delta: extension?.prompt_delta ?? null,
      response_token_ids: ids,
      response_logprobs: extension?.response_logprobs ?? logprobs,
      finish_reason: choice.finish_reason ?? null,
      stop_reason: choice.stop_reason ?? null,
      request,
      response_message: message as CompletionRecord['response_message'],
      original_request: polar.original_request ?? {},
      usage: polar.response.usage ?? null,
      warnings: extension?.warnings ?? [],
      error: extension?.error ?? null,
      timing: extension?.timing ?? { started_at: polar.timestamp ?? '', upstream_ms: 0, total_ms: 0 },
      provenance: extension?.provenance ?? {
        upstream_kind: 'vllm',
        upstream_url: '',
        sampling_params: {},
        logprobs_mode: null,
        policy_version: null,
        route: 'polar',
      },
      metadata,
    }
    return record
  })
}
