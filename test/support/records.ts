/**
 * @module
 * Tiny factories for completion inputs in tests.
 */
import type { CompletionInput } from '../../src/durable/session/record.ts'

export function completionInput(overrides: Partial<CompletionInput> & { completion_id: string }): CompletionInput {
  return {
    timestamp: new Date().toISOString(),
    api: 'openai-chat',
    agent: 'main',
    model_requested: 'gpt-test',
    model_used: 'Qwen/Qwen3-8B',
    stream: false,
    status: 'ok',
    prompt_token_ids: Uint32Array.from([1, 2, 3]),
    response_token_ids: Uint32Array.from([10, 11, 151645]),
    response_logprobs: Float64Array.from([-0.5, -0.25, -0.125]),
    finish_reason: 'stop',
    stop_reason: null,
    request_text: JSON.stringify({ model: 'Qwen/Qwen3-8B', messages: [{ role: 'user', content: 'hi' }] }),
    original_text: JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] }),
    response_message: { role: 'assistant', content: 'hello' },
    usage: { prompt_tokens: 3, completion_tokens: 3 },
    warnings: [],
    error: null,
    timing: { started_at: new Date().toISOString(), upstream_ms: 1, total_ms: 2 },
    provenance: {
      upstream_kind: 'vllm',
      upstream_url: 'http://127.0.0.1:8000',
      sampling_params: { model: 'Qwen/Qwen3-8B' },
      logprobs_mode: null,
      policy_version: null,
      route: 'direct',
    },
    metadata: {},
    ...overrides,
  }
}

/** A growing conversation: turn k's prompt extends turn k-1's prompt + response + interstitial. */
export function growingSession(
  turns: number,
  firstPrompt = 2000,
  growth = 300,
  responseLength = 200,
  /** Each turn's tool message is `output <turn> ` this many times. */
  toolRepeat = 40,
): CompletionInput[] {
  const out: CompletionInput[] = []
  let prompt: number[] = Array.from({ length: firstPrompt }, (_, i) => (i * 7919) % 150000)
  const messages: { role: string; content: string }[] = [
    { role: 'system', content: 'You are an agent.' },
    { role: 'user', content: 'Fix the bug.' },
  ]
  for (let turn = 0; turn < turns; turn++) {
    const response = Array.from({ length: responseLength }, (_, i) => (turn * 1000 + i * 31) % 150000)
    response[response.length - 1] = 151645
    const logprobs = response.map((_, i) => Math.fround(-((turn + 1) * (i + 1)) / 4096))
    out.push(
      completionInput({
        completion_id: `cmpl_${turn}`,
        prompt_token_ids: Uint32Array.from(prompt),
        response_token_ids: Uint32Array.from(response),
        response_logprobs: Float64Array.from(logprobs),
        request_text: JSON.stringify({ model: 'Qwen/Qwen3-8B', messages, tools: [{ type: 'function', function: { name: 'bash' } }] }),
        original_text: JSON.stringify({ model: 'gpt-test', messages }),
      }),
    )
    const toolOutput = Array.from(
      { length: growth - responseLength > 0 ? growth - responseLength : 10 },
      (_, i) => (turn * 77 + i) % 150000,
    )
    prompt = [...prompt, ...response, 198, ...toolOutput]
    messages.push({ role: 'assistant', content: `turn ${turn} answer` }, { role: 'tool', content: `output ${turn} `.repeat(toolRepeat) })
  }
  return out
}

/**
 * Like `growingSession`, but produced one input at a time (a 1,000-turn session's bodies are never all in
 * memory) with short messages: each turn adds `growth` prompt tokens and two small messages.
 */
export function* growingSessionInputs(turns: number, firstPrompt = 200, growth = 5, responseLength = 2): Generator<CompletionInput> {
  const prompt: number[] = Array.from({ length: firstPrompt }, (_, i) => (i * 7919) % 150000)
  const messages: { role: string; content: string }[] = [
    { role: 'system', content: 'You are an agent.' },
    { role: 'user', content: 'Fix the bug.' },
  ]
  for (let turn = 0; turn < turns; turn++) {
    const response = Array.from({ length: responseLength }, (_, i) => (turn * 1000 + i * 31) % 150000)
    response[response.length - 1] = 151645
    yield completionInput({
      completion_id: `cmpl_${turn}`,
      prompt_token_ids: Uint32Array.from(prompt),
      response_token_ids: Uint32Array.from(response),
      response_logprobs: Float64Array.from(response.map((_, i) => Math.fround(-((turn + 1) * (i + 1)) / 4096))),
      request_text: JSON.stringify({ model: 'Qwen/Qwen3-8B', messages, tools: [{ type: 'function', function: { name: 'bash' } }] }),
      original_text: JSON.stringify({ model: 'gpt-test', messages }),
    })
    prompt.push(...response, 198)
    for (let i = prompt.length; prompt.length < i + Math.max(1, growth - responseLength - 1); )
      prompt.push((turn * 77 + prompt.length) % 150000)
    messages.push({ role: 'assistant', content: `a${turn}` }, { role: 'tool', content: `out ${turn}` })
  }
}

/** Qwen3's generation prompt with thinking off (`<think>\n\n</think>\n\n`): history re-renders drop it. */
const EMPTY_THINK = [151667, 271, 151668, 271]

/**
 * A session whose template strips thinking from history (Qwen3 with thinking off): turn k's prompt ends with
 * the empty think block, and turn k+1's prompt re-renders turn k without it, so no prompt is a prefix of the
 * next (Polar-strict: a trace per turn, O(turns²) tokens in all). Each turn adds about `growth` prompt tokens,
 * and two short messages; one input at a time, timestamps a second apart.
 */
export function* strippedThinkingInputs(turns: number, firstPrompt = 200, growth = 20, responseLength = 4): Generator<CompletionInput> {
  const history: number[] = Array.from({ length: firstPrompt }, (_, i) => (i * 7919) % 150000)
  const messages: { role: string; content: string }[] = [
    { role: 'system', content: 'You are an agent.' },
    { role: 'user', content: 'Fix the bug.' },
  ]
  const start = Date.UTC(2026, 0, 1)
  for (let turn = 0; turn < turns; turn++) {
    const response = Array.from({ length: responseLength }, (_, i) => 1000 + ((turn * 131 + i * 31) % 140000))
    response[response.length - 1] = 151645
    const at = new Date(start + turn * 1000).toISOString()
    yield completionInput({
      completion_id: `cmpl_${String(turn).padStart(6, '0')}`,
      timestamp: at,
      timing: { started_at: at, upstream_ms: 1, total_ms: 2 },
      prompt_token_ids: Uint32Array.from([...history, 151644, 77091, 198, ...EMPTY_THINK]),
      response_token_ids: Uint32Array.from(response),
      response_logprobs: Float64Array.from(response.map((_, i) => Math.fround(-((turn + 1) * (i + 1)) / 4096))),
      finish_reason: 'tool_calls',
      request_text: JSON.stringify({ model: 'Qwen/Qwen3-8B', messages, tools: [{ type: 'function', function: { name: 'bash' } }] }),
      original_text: JSON.stringify({ model: 'gpt-test', messages }),
      response_message: { role: 'assistant', content: `a${turn}` },
    })
    history.push(151644, 77091, 198, ...response, 198)
    for (let i = history.length; history.length < i + Math.max(1, growth - responseLength - 4); )
      history.push((turn * 77 + history.length) % 150000)
    messages.push({ role: 'assistant', content: `a${turn}` }, { role: 'tool', content: `out ${turn}` })
  }
}
