import { beforeAll, describe, expect, it } from 'vitest'
import type { TemplateMessage } from '../chat-template-input.ts'
import { parseAssistantOutput } from '../output-parser.ts'
import { loadQwen3, type Qwen3 } from '../qwen3.ts'
import { createRng } from '../rng.ts'
import { toToolSpecs } from './assistant-text.ts'
import { createDriftPolicy } from './drift.ts'
import { findWorkingDirectory, parseFileInstruction } from './instruction.ts'
import { sampleJsonForSchema } from './json-schema-sample.ts'
import type { PolicyInput, ResponseFormat } from './policy.ts'
import { createScriptPolicy } from './script.ts'
import { createScriptedPolicy } from './scripted.ts'

const LOAD_TIMEOUT_MS = 60_000

function fn(name: string, properties: Record<string, unknown>, required: string[], description = '') {
  return {
    type: 'function',
    function: { name, description, parameters: { type: 'object', properties, required } },
  }
}

const claudeWrite = fn(
  'Write',
  {
    file_path: {
      type: 'string',
      description: 'The absolute path to the file to write (must be absolute, not relative)',
    },
    content: { type: 'string' },
  },
  ['file_path', 'content'],
  'Writes a file to the local filesystem.',
)
const claudeBash = fn('Bash', { command: { type: 'string' }, description: { type: 'string' } }, ['command'])
const claudeEdit = fn('Edit', { file_path: { type: 'string' }, old_string: { type: 'string' }, new_string: { type: 'string' } }, [
  'file_path',
  'old_string',
  'new_string',
])
const geminiWrite = fn(
  'write_file',
  {
    file_path: { type: 'string', description: 'The path to the file to write to.' },
    content: { type: 'string' },
  },
  ['file_path', 'content'],
)
const opencodeWrite = fn(
  'write',
  {
    filePath: { type: 'string', description: 'The absolute path to the file to write' },
    content: { type: 'string' },
  },
  ['content', 'filePath'],
)
const piWrite = fn('write', { path: { type: 'string' }, content: { type: 'string' } }, ['path', 'content'])
const codexExec = fn('exec_command', { cmd: { type: 'string' }, workdir: { type: 'string' }, yield_time_ms: { type: 'number' } }, ['cmd'])
const codexPatch = {
  type: 'custom',
  custom: {
    name: 'apply_patch',
    description: 'Use the `apply_patch` tool to edit files. This is a FREEFORM tool.',
    format: { type: 'grammar', syntax: 'lark', definition: 'start: begin_patch hunk+ end_patch' },
  },
}
const argvShell = fn('shell', { command: { type: 'array', items: { type: 'string' } } }, ['command'])

function input(messages: TemplateMessage[], tools: unknown[], overrides: Partial<PolicyInput> = {}): PolicyInput {
  return {
    messages,
    tools: toToolSpecs(tools),
    enableThinking: true,
    responseFormat: null,
    rng: createRng(1),
    ...overrides,
  }
}

function onlyCall(text: string) {
  const parsed = parseAssistantOutput(text, { parseToolCalls: true })
  expect(parsed.toolCalls).toHaveLength(1)
  const call = parsed.toolCalls[0]
  return {
    name: call?.name,
    args: JSON.parse(call?.arguments ?? 'null') as Record<string, unknown>,
  }
}

const ask = (content: string): TemplateMessage => ({ role: 'user', content })

describe('instruction parsing', () => {
  it.each([
    ['create hello.txt containing hi', 'hello.txt', 'hi'],
    ['Please create a file named notes.md with the content "hello world".', 'notes.md', 'hello world'],
    ['Create a new file called src/app.py containing print(1)', 'src/app.py', 'print(1)'],
    ["write 'bonjour' to greeting.txt", 'greeting.txt', 'bonjour'],
    ['make out/result.json with contents {"ok": true}', 'out/result.json', '{"ok": true}'],
  ])('%s', (text, path, content) => {
    expect(parseFileInstruction(text)).toEqual({ path, content })
  })

  it('ignores text without a file name', () => {
    expect(parseFileInstruction('create a branch with the text main')).toBeNull()
    expect(parseFileInstruction('hello there')).toBeNull()
  })

  it('finds working directories in harness system prompts', () => {
    const system = (content: string): TemplateMessage[] => [{ role: 'system', content }, ask('x')]
    expect(findWorkingDirectory(system('<env>\nWorking directory: /tmp/proj\nIs git repo: no\n</env>'))).toBe('/tmp/proj')
    expect(findWorkingDirectory(system('<environment_context>\n  <cwd>/work/a</cwd>\n</environment_context>'))).toBe('/work/a')
    expect(findWorkingDirectory(system("I'm currently working in the directory: /home/u/p."))).toBe('/home/u/p')
    expect(findWorkingDirectory(system('nothing here'))).toBeNull()
  })
})

describe('scripted policy', () => {
  const policy = createScriptedPolicy()
  const task = [{ role: 'system', content: '<env>\nWorking directory: /tmp/proj\n</env>' }, ask('create notes.md containing hello world')]

  it.each([
    [
      'Claude Code Write (absolute)',
      [claudeBash, claudeEdit, claudeWrite],
      'Write',
      { file_path: '/tmp/proj/notes.md', content: 'hello world' },
    ],
    ['Gemini write_file (relative)', [geminiWrite], 'write_file', { file_path: 'notes.md', content: 'hello world' }],
    ['opencode write (absolute filePath)', [opencodeWrite], 'write', { filePath: '/tmp/proj/notes.md', content: 'hello world' }],
    ['pi write', [piWrite], 'write', { path: 'notes.md', content: 'hello world' }],
  ])('%s', (_label, tools, name, args) => {
    const call = onlyCall(policy.generate(input(task, tools)).text)
    expect(call.name).toBe(name)
    expect(call.args).toEqual(args)
  })

  it('uses a shell tool when there is no write tool', () => {
    const call = onlyCall(policy.generate(input(task, [codexExec])).text)
    expect(call).toEqual({
      name: 'exec_command',
      args: { cmd: "printf '%s' 'hello world' > notes.md" },
    })
    const argv = onlyCall(policy.generate(input(task, [argvShell])).text)
    expect(argv.args).toEqual({ command: ['bash', '-lc', "printf '%s' 'hello world' > notes.md"] })
  })

  it("fills Bash's other required parameters", () => {
    const requiring = fn('Bash', { command: { type: 'string' }, description: { type: 'string' } }, ['command', 'description'])
    const call = onlyCall(policy.generate(input([ask('create a.txt containing b')], [requiring])).text)
    expect(call.args).toEqual({ command: "printf '%s' b > a.txt", description: 'Create a.txt' })
  })

  it("emits an add-file patch for Codex's freeform apply_patch", () => {
    const call = onlyCall(policy.generate(input([ask('create hello.txt containing hi')], [codexPatch])).text)
    expect(call.name).toBe('apply_patch')
    expect(call.args).toEqual({
      input: '*** Begin Patch\n*** Add File: hello.txt\n+hi\n*** End Patch',
    })
  })

  it('defaults to hello.txt containing hi', () => {
    expect(onlyCall(policy.generate(input([ask('do the task')], [piWrite])).text).args).toEqual({
      path: 'hello.txt',
      content: 'hi',
    })
  })

  it('formats thinking like the Qwen3 template', () => {
    const thinking = policy.generate(input([ask('create a.txt containing b')], [piWrite])).text
    expect(thinking).toMatch(
      /^<think>\n[^\n]+\n<\/think>\n\n<tool_call>\n\{"name": "write", "arguments": \{"path": "a.txt", "content": "b"\}\}\n<\/tool_call>$/,
    )
    const plain = policy.generate(input([ask('create a.txt containing b')], [piWrite], { enableThinking: false })).text
    expect(plain.startsWith('<tool_call>\n')).toBe(true)
  })

  it('answers with a final text once the tool result is back', () => {
    const messages: TemplateMessage[] = [
      ask('create hello.txt containing hi'),
      {
        role: 'assistant',
        content: '',
        tool_calls: [
          {
            type: 'function',
            function: { name: 'write', arguments: { path: 'hello.txt', content: 'hi' } },
          },
        ],
      },
      { role: 'tool', content: 'ok' },
    ]
    const parsed = parseAssistantOutput(policy.generate(input(messages, [piWrite])).text, {
      parseToolCalls: true,
    })
    expect(parsed.toolCalls).toEqual([])
    // vLLM's qwen3 reasoning parser keeps the newlines that follow </think>.
    expect(parsed.content).toBe('\n\nCreated hello.txt containing "hi".')
    const next = [...messages, { role: 'assistant', content: 'done' }, ask('create b.txt containing c')]
    expect(onlyCall(policy.generate(input(next, [piWrite])).text).args).toEqual({
      path: 'b.txt',
      content: 'c',
    })
  })

  it('answers side calls without tools with a short text', () => {
    const title = policy.generate(
      input([{ role: 'system', content: 'Generate a short title for the conversation.' }, ask('create hello.txt containing hi')], [], {
        enableThinking: false,
      }),
    )
    expect(title.text).toBe('Create hello.txt')
    const plain = policy.generate(input([ask('hello')], [claudeEdit], { enableThinking: false })).text
    expect(plain).not.toContain('<tool_call>')
  })

  it('emits schema-valid JSON for structured output', () => {
    const format: ResponseFormat = {
      type: 'json_schema',
      schema: {
        type: 'object',
        properties: {
          reasoning: { type: 'string' },
          model_choice: { type: 'string', enum: ['flash', 'pro'] },
          score: { type: 'integer', minimum: 3, maximum: 9 },
          optional: { type: 'string' },
        },
        required: ['reasoning', 'model_choice', 'score'],
      },
    }
    const text = policy.generate(input([ask('route this')], [], { responseFormat: format, enableThinking: false })).text
    expect(JSON.parse(text)).toEqual({ reasoning: 'ok', model_choice: 'flash', score: 3 })
  })

  it('is deterministic per rng seed', () => {
    const run = (seed: number) => policy.generate(input(task, [piWrite], { rng: createRng(seed) })).text
    expect(run(5)).toBe(run(5))
    expect(new Set([1, 2, 3, 4, 5, 6, 7, 8].map(run)).size).toBeGreaterThan(1)
  })
})

describe('sampleJsonForSchema', () => {
  it('handles refs, anyOf, arrays, Gemini upper-case types and bounds', () => {
    const schema = {
      $defs: { Kind: { type: 'string', enum: ['a', 'b'] } },
      type: 'OBJECT',
      properties: {
        kind: { $ref: '#/$defs/Kind' },
        maybe: { anyOf: [{ type: 'null' }, { type: 'number', exclusiveMinimum: 0 }] },
        tags: { type: 'array', items: { type: 'STRING' }, minItems: 2 },
        title: { type: 'string', minLength: 3 },
        flag: { type: 'boolean' },
      },
      required: ['kind', 'maybe', 'tags', 'title', 'flag'],
    }
    expect(sampleJsonForSchema(schema, { title: 'T' })).toEqual({
      kind: 'a',
      maybe: 0.5,
      tags: ['ok', 'ok'],
      title: 'Txx',
      flag: false,
    })
  })
})

describe('script policy', () => {
  const policy = createScriptPolicy([
    { reasoning: 'first', tool_calls: [{ name: 'bash', arguments: '{"cmd": "ls"}' }] },
    { content: 'All done.' },
  ])

  it('picks the turn from the number of assistant messages', () => {
    const first = policy.generate(input([ask('go')], [])).text
    expect(first).toBe('<think>\nfirst\n</think>\n\n<tool_call>\n{"name": "bash", "arguments": {"cmd": "ls"}}\n</tool_call>')
    const history: TemplateMessage[] = [ask('go'), { role: 'assistant', content: '' }, { role: 'tool', content: 'x' }]
    expect(policy.generate(input(history, [], { enableThinking: false })).text).toBe('All done.')
    const exhausted = [...history, { role: 'assistant', content: 'All done.' }, ask('more')]
    expect(policy.generate(input(exhausted, [], { enableThinking: false })).text).toBe('Done.')
  })
})

describe('drift policy', () => {
  let qwen3: Qwen3
  beforeAll(async () => {
    qwen3 = await loadQwen3()
  }, LOAD_TIMEOUT_MS)

  it('samples a non-canonical tokenization of the same text', () => {
    const drift = createDriftPolicy(createScriptedPolicy(), qwen3)
    const task = [ask('create notes.md containing hello world')]
    const output = drift.generate(input(task, [piWrite], { rng: createRng(3) }))
    const ids = output.tokenIds ?? []
    expect(qwen3.decode(ids)).toBe(output.text)
    const canonical = qwen3.encode(output.text)
    expect(ids).not.toEqual(canonical)
    expect(ids.length).toBeGreaterThan(canonical.length)
    // The part after </think> (re-rendered by the template next turn) drifts too.
    const afterThink = (list: number[]) => list.slice(list.indexOf(qwen3.specialTokens.thinkEnd))
    expect(afterThink(ids)).not.toEqual(afterThink(canonical))
    expect(drift.generate(input(task, [piWrite], { rng: createRng(3) })).tokenIds).toEqual(ids)
    expect(drift.generate(input(task, [piWrite], { rng: createRng(4) })).tokenIds).not.toEqual(ids)
  })
})
