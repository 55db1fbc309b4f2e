/**
 * @module
 * The agent of `bench:long-session` (and its A/B, `bench:long-session-ab`): a coding agent that calls one
 * tool every turn and gets a text result back, so every prompt extends the last. With thinking on (the
 * default) it sends the reasoning back as the edge returned it (`reasoning_content`).
 */

export const TOOLS = [
  {
    type: 'function',
    function: {
      name: 'run_shell_command',
      description: 'Run a shell command.',
      parameters: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] },
    },
  },
]

/** ≈ 25 Qwen3 tokens per line. */
export const OUTPUT_LINE = 'src/config/loader.ts:118: export function loadConfig(path: string): Config { // reads and validates\n'

/** The stand-in engine's `script` policy for `turns` turns. */
export function agentScript(turns: number) {
  return Array.from({ length: turns }, (_, turn) => ({
    // Sampled only with thinking on (the default session); ≈ 15 tokens.
    reasoning: `Turn ${turn}: the matches so far do not show the failing call, list more of them.`,
    tool_calls: [{ name: 'run_shell_command', arguments: { command: `grep -n loadConfig src -r | head -${turn + 10}` } }],
  }))
}

/** The conversation's first two messages. */
export function firstMessages(): Record<string, unknown>[] {
  return [
    { role: 'system', content: `You are a coding agent.\n${'Follow the repository conventions. '.repeat(120)}` },
    { role: 'user', content: 'Investigate why config loading fails and fix it.' },
  ]
}

export interface AgentAnswer {
  usage: { prompt_tokens: number }
  choices: {
    message: {
      content: string | null
      reasoning_content?: string | null
      tool_calls?: { id: string; function: { name: string; arguments: string } }[]
    }
  }[]
}

/** Append the answer's assistant turn and its tool's result (≈ `resultTokens` tokens) to `messages`. */
export function appendTurn(messages: Record<string, unknown>[], answer: AgentAnswer, turn: number, resultTokens: number): void {
  const message = answer.choices[0]?.message
  const call = message?.tool_calls?.[0]
  if (!message || !call) throw new Error(`turn ${turn}: no tool call`)
  // The agent sends the reasoning back as it got it (with thinking on the template re-renders it).
  messages.push({
    role: 'assistant',
    content: message.content,
    ...(typeof message.reasoning_content === 'string' ? { reasoning_content: message.reasoning_content } : {}),
    tool_calls: message.tool_calls,
  })
  const lines = Math.max(1, Math.round(resultTokens / 25))
  messages.push({ role: 'tool', tool_call_id: call.id, content: `turn ${turn}\n${OUTPUT_LINE.repeat(lines)}` })
}
