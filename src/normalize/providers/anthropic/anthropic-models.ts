/**
 * @module
 * `GET /v1/models` in Anthropic's list shape, merged with OpenAI's fields (`object`, `created`,
 * `owned_by`) so clients of either kind read it (Claude Code accepts the merged shape).
 * @see https://docs.anthropic.com/en/api/models-list
 */

export interface ListedModel {
  id: string
  /** Unix seconds. */
  created: number
}

export function buildAnthropicModelList(models: ListedModel[]) {
  const data = models.map((model) => ({
    type: 'model' as const,
    id: model.id,
    display_name: model.id,
    created_at: new Date(model.created * 1000).toISOString(),
    object: 'model' as const,
    created: model.created,
    owned_by: 'rollgate',
  }))
  return {
    object: 'list' as const,
    data,
    has_more: false,
    first_id: data[0]?.id ?? null,
    last_id: data.at(-1)?.id ?? null,
  }
}

/** Claude Code's discovery call carries these; OpenAI clients send neither. */
export function wantsAnthropicModelList(headers: Headers): boolean {
  return headers.has('anthropic-version') || headers.has('x-api-key')
}
