/**
 * @module
 * Realistic agent chat requests of a target size: a system prompt, tool schemas, and a history of
 * user / assistant tool-call / tool-result turns until the body reaches the size.
 */

const TOOLS = [
  {
    type: 'function',
    function: {
      name: 'run_shell_command',
      description: 'Run a shell command in the workspace and return stdout, stderr and the exit code.',
      parameters: { type: 'object', properties: { command: { type: 'string' }, timeout_ms: { type: 'number' } }, required: ['command'] },
    },
  },
  {
    type: 'function',
    function: {
      name: 'write_file',
      description: 'Write a file in the workspace.',
      parameters: {
        type: 'object',
        properties: { file_path: { type: 'string' }, content: { type: 'string' } },
        required: ['file_path', 'content'],
      },
    },
  },
]

const LINE = 'src/module.ts:42:  const value = compute(input, options) // returns the parsed configuration\n'

export function chatBody(targetBytes: number, model = 'bench-model'): Record<string, unknown> {
  const messages: Record<string, unknown>[] = [
    { role: 'system', content: 'You are a careful coding agent. Use the tools to inspect and change the repository.' },
    { role: 'user', content: 'The tests in test/config.test.ts fail. Find out why and fix it.' },
  ]
  let turn = 0
  const body = { model, messages, tools: TOOLS, temperature: 1, max_tokens: 512 }
  while (JSON.stringify(body).length < targetBytes) {
    const remaining = targetBytes - JSON.stringify(body).length
    const output = LINE.repeat(Math.max(1, Math.min(60, Math.floor(remaining / LINE.length))))
    messages.push(
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          {
            id: `call_${turn}`,
            type: 'function',
            function: { name: 'run_shell_command', arguments: JSON.stringify({ command: `grep -rn compute src | head -${turn + 5}` }) },
          },
        ],
      },
      { role: 'tool', tool_call_id: `call_${turn}`, content: output },
    )
    turn++
  }
  return body
}
