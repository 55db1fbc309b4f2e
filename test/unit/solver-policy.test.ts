/**
 * The `solver` stand-in policy against every recorded harness's real tool schemas (the adapter
 * fixtures, parsed by the edge's own adapters into what the engine sees), with tool results simulated
 * in each harness's output format over an in-memory copy of `tasks/fix-stats/repo`: pytest output is
 * computed from the file's content, edits are applied, sub-agent tools run a nested conversation.
 */
import { readdirSync, readFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import { describe, expect, it } from 'vitest'
import type { TemplateMessage } from '../../engine/chat-template-input.ts'
import { parseAssistantOutput } from '../../engine/output-parser.ts'
import { toToolSpecs } from '../../engine/policy/assistant-text.ts'
import { KNOWN_FIXES } from '../../engine/policy/known-fixes.ts'
import type { Policy, ToolSpec } from '../../engine/policy/policy.ts'
import { createSolverPolicy, DELEGATION_PHRASE } from '../../engine/policy/solver.ts'
import { createRng, hashString } from '../../engine/rng.ts'
import type { ProviderAdapter } from '../../src/normalize/adapter.ts'
import { anthropic } from '../../src/normalize/providers/anthropic/index.ts'
import { google } from '../../src/normalize/providers/google/index.ts'
import { openaiChat } from '../../src/normalize/providers/openai-chat/index.ts'
import { openaiResponses } from '../../src/normalize/providers/openai-responses/index.ts'

const ROOT = join(import.meta.dirname, '../..')
const REPO = join(ROOT, 'tasks/fix-stats/repo')
const WORKDIR = '/polar/session/workspace'
const INSTRUCTION = JSON.parse(readFileSync(join(ROOT, 'tasks/fix-stats/task.json'), 'utf8')).instruction as string
const FIX = KNOWN_FIXES.find((fix) => fix.id === 'fix-stats/median-even')!
const ADAPTERS: Record<string, ProviderAdapter> = {
  anthropic,
  google,
  'openai-chat': openaiChat,
  'openai-responses': openaiResponses,
}

interface Recorded {
  tools: unknown[]
  /** The harness's own system prompt, its recorded working directory replaced by ours. */
  system: string
}

/** For each recorded variant, the tools and system prompt of its richest recorded request (as the engine receives them). */
function recordedToolSets(): Map<string, Recorded> {
  const sets = new Map<string, Recorded>()
  for (const [api, adapter] of Object.entries(ADAPTERS)) {
    const dir = join(ROOT, 'src/normalize/providers', api, '__fixtures__')
    for (const file of readdirSync(dir)) {
      const match = /^([a-z0-9-]+)-hello\.\d+\.request\.json$/.exec(file)
      if (!match?.[1]) continue
      const data = JSON.parse(readFileSync(join(dir, file), 'utf8')) as { path: string; body: unknown }
      const request = adapter.parseRequest(data.body, new URL(data.path, 'http://edge.test')).request
      const tools = request.tools ?? []
      const system = request.messages
        .filter((message) => message.role === 'system' || message.role === 'developer')
        .map((message) => (typeof message.content === 'string' ? message.content : JSON.stringify(message.content)))
        .join('\n')
        .replaceAll('/workspace/project', WORKDIR)
      if (tools.length > (sets.get(match[1])?.tools.length ?? 0)) sets.set(match[1], { tools, system })
    }
  }
  return sets
}

function readRepo(): Map<string, string> {
  const files = new Map<string, string>()
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name)
      if (entry.isDirectory()) {
        if (entry.name !== '__pycache__') walk(path)
      } else files.set(relative(REPO, path), readFileSync(path, 'utf8'))
    }
  }
  walk(REPO)
  return files
}

/** Gemini CLI's sub-agent completion tool (its default schema, from the CLI's bundle). */
const COMPLETE_TASK = {
  type: 'function',
  function: {
    name: 'complete_task',
    description: 'Call this tool to submit your final answer and complete the task.',
    // The generalist's output config: `result: {response: string}`.
    parameters: {
      type: 'object',
      properties: { result: { type: 'object', properties: { response: { type: 'string' } }, required: ['response'] } },
      required: ['result'],
    },
  },
}

type Family = 'codex' | 'claude' | 'gemini' | 'qwen' | 'opencode' | 'pi'
const familyOf = (variant: string): Family =>
  variant.startsWith('claude')
    ? 'claude'
    : variant.startsWith('gemini')
      ? 'gemini'
      : variant.startsWith('qwen')
        ? 'qwen'
        : (variant.split('-')[0] as Family)

/** A harness over an in-memory workspace: executes the policy's tool calls, answers in the harness's formats. */
class SimulatedHarness {
  readonly files = readRepo()
  readonly read = new Set<string>()
  calls = 0
  subagentCalls = 0
  /** Tool-call log of every conversation (main and sub-agents), in order. */
  readonly log: Array<{ agent: 'main' | 'sub'; name: string; args: Record<string, unknown>; result: string }> = []
  rejectNextEdit = false
  /** Commands (by prefix) whose output the harness loses once, as Qwen Code 0.24.4 can (`Output: (empty)`). */
  loseOutputOnce: string[] = []
  /** Times a sub-agent had to be told to call its completion tool. */
  nudges = 0

  readonly family: Family
  readonly recorded: Recorded
  readonly policy: Policy
  readonly seed: number

  constructor(family: Family, recorded: Recorded, policy: Policy, seed: number) {
    this.family = family
    this.recorded = recorded
    this.policy = policy
    this.seed = seed
  }

  get tools(): unknown[] {
    return this.recorded.tools
  }

  /** Runs one agent conversation to its final text. */
  converse(prompt: string, agent: 'main' | 'sub', tools: unknown[]): { final: string; texts: string[] } {
    const messages: TemplateMessage[] = [
      { role: 'system', content: this.recorded.system },
      { role: 'user', content: prompt },
    ]
    const specs = toToolSpecs(tools)
    const texts: string[] = []
    let nudged = false
    for (let turn = 0; turn < 40; turn++) {
      const rng = createRng(hashString(JSON.stringify(messages), this.seed))
      const { text } = this.policy.generate({ messages, tools: specs, enableThinking: true, responseFormat: null, rng })
      texts.push(text)
      if (agent === 'main') this.calls++
      else this.subagentCalls++
      const parsed = parseAssistantOutput(text, { parseToolCalls: true })
      if (parsed.toolCalls.length === 0) {
        if (agent === 'sub' && specs.some((spec) => spec.name === 'complete_task') && !nudged) {
          // What Gemini CLI does when a sub-agent answers in text instead of calling complete_task.
          nudged = true
          this.nudges++
          messages.push({ role: 'assistant', content: parsed.content ?? '' })
          messages.push({
            role: 'user',
            content: 'You have stopped calling tools without finishing. You MUST call `complete_task` immediately.',
          })
          continue
        }
        return { final: parsed.content ?? '', texts }
      }
      const calls = parsed.toolCalls.map((call, index) => ({
        id: `call_${turn}_${index}`,
        type: 'function',
        function: { name: call.name, arguments: JSON.parse(call.arguments) as Record<string, unknown> },
      }))
      messages.push({ role: 'assistant', content: parsed.content ?? '', reasoning_content: parsed.reasoning ?? '', tool_calls: calls })
      for (const call of calls) {
        // Gemini CLI ends a sub-agent when it calls complete_task; its `result` is the answer.
        if (call.function.name === 'complete_task') return { final: JSON.stringify(call.function.arguments.result), texts }
        const spec = specs.find((tool) => tool.name === call.function.name)
        expect(spec, `unknown tool ${call.function.name}`).toBeDefined()
        for (const key of (spec?.parameters?.required as string[] | undefined) ?? []) {
          expect(call.function.arguments, `${call.function.name} misses ${key}`).toHaveProperty(key)
        }
        const result = this.execute(call.function.name, call.function.arguments, specs)
        this.log.push({ agent, name: call.function.name, args: call.function.arguments, result })
        messages.push({ role: 'tool', tool_call_id: call.id, content: result })
      }
    }
    throw new Error('conversation did not finish in 40 turns')
  }

  private execute(name: string, args: Record<string, unknown>, specs: ToolSpec[]): string {
    const props = Object.keys((specs.find((tool) => tool.name === name)?.parameters?.properties as object | undefined) ?? {})
    if (/^(?:task|agent|invoke_agent)$/i.test(name)) {
      const subTools = [
        ...this.tools.filter((tool) => toToolSpecs([tool])[0]?.name !== name),
        ...(this.family === 'gemini' ? [COMPLETE_TASK] : []),
      ]
      const { final } = this.converse(String(args.prompt), 'sub', subTools)
      return this.family === 'gemini' ? JSON.stringify({ output: final }) : final
    }
    if (name === 'apply_patch') return this.applyPatch(String(args.input))
    const command = args.command ?? args.cmd
    if (command !== undefined) {
      const text = Array.isArray(command) ? String(command.at(-1)) : String(command)
      const ran = this.shell(text)
      const lost = this.loseOutputOnce.findIndex((prefix) => text.startsWith(prefix))
      if (lost < 0) return this.formatShell(text, ran)
      this.loseOutputOnce.splice(lost, 1)
      return this.formatShell(text, { output: '', code: ran.code })
    }
    const path = this.relativePath(String(args.file_path ?? args.filePath ?? args.path ?? ''))
    if (props.some((key) => /old|edits/i.test(key))) return this.edit(path, args)
    return this.readFile(path)
  }

  private relativePath(path: string): string {
    return path.startsWith(`${WORKDIR}/`) ? path.slice(WORKDIR.length + 1) : path.replace(/^\.\//, '')
  }

  private readFile(path: string): string {
    const text = this.files.get(path)
    if (text === undefined) return `Error: file not found: ${path}`
    this.read.add(path)
    const lines = text.replace(/\n$/, '').split('\n')
    if (this.family === 'claude') return lines.map((line, index) => `${String(index + 1).padStart(6)}→${line}`).join('\n')
    if (this.family === 'opencode')
      return `<path>${WORKDIR}/${path}</path>\n<content>\n${lines.map((line, i) => `${i + 1}: ${line}`).join('\n')}\n</content>`
    if (this.family === 'gemini') return JSON.stringify({ output: text })
    return text
  }

  private edit(path: string, args: Record<string, unknown>): string {
    const edits = Array.isArray(args.edits) ? (args.edits as Array<Record<string, string>>) : [args as Record<string, string>]
    if ((this.family === 'claude' || this.family === 'opencode') && !this.read.has(path)) {
      return 'Error: File has not been read yet. Read it first before writing to it.'
    }
    if (this.rejectNextEdit) {
      this.rejectNextEdit = false
      return 'Error: old_string not found in file'
    }
    let text = this.files.get(path)
    if (text === undefined) return `Error: file not found: ${path}`
    for (const edit of edits) {
      const oldText = edit.old_string ?? edit.oldString ?? edit.oldText ?? ''
      const newText = edit.new_string ?? edit.newString ?? edit.newText ?? ''
      if (!text.includes(oldText)) return 'Error: old_string not found in file'
      text = text.replace(oldText, newText)
    }
    this.files.set(path, text)
    return this.family === 'gemini'
      ? JSON.stringify({ output: `Successfully modified file: ${WORKDIR}/${path} (1 replacements).` })
      : 'Edit applied successfully.'
  }

  private applyPatch(input: string): string {
    const path = /\*\*\* Update File: (\S+)/.exec(input)?.[1] ?? ''
    const oldLines = [...input.matchAll(/^-(.*)$/gm)].map((match) => match[1]).join('\n')
    const newLines = [...input.matchAll(/^\+(.*)$/gm)].map((match) => match[1]).join('\n')
    const text = this.files.get(path)
    if (text === undefined || !text.includes(oldLines)) return `apply_patch verification failed: Failed to find expected lines in ${path}`
    this.files.set(path, text.replace(oldLines, newLines))
    return `Success. Updated the following files:\nM ${path}\n`
  }

  /** The few commands a coding agent runs here, simulated over the in-memory files. */
  private shell(command: string): { output: string; code: number } {
    if (command.startsWith('pwd && find')) {
      return {
        output: `${WORKDIR}\n${[...this.files.keys()]
          .sort()
          .map((path) => `./${path}`)
          .join('\n')}\n`,
        code: 0,
      }
    }
    if (command.includes('pytest')) return this.pytest(command)
    if (command.startsWith('grep -n "def "')) {
      const out: string[] = []
      for (const path of command.split(' ').slice(3)) {
        ;(this.files.get(path) ?? '').split('\n').forEach((line, index) => {
          if (line.includes('def ')) out.push(`${path}:${index + 1}:${line}`)
        })
      }
      return { output: `${out.join('\n')}\n`, code: out.length > 0 ? 0 : 1 }
    }
    if (command.startsWith('cat ')) {
      const path = command.slice(4).trim()
      this.read.add(path)
      return { output: this.files.get(path) ?? `cat: ${path}: No such file or directory\n`, code: this.files.has(path) ? 0 : 1 }
    }
    if (command.startsWith('git --no-pager diff')) {
      const fixed = this.files.get('stats/core.py')?.includes(FIX.fixed)
      return { output: fixed ? `--- a/stats/core.py\n+++ b/stats/core.py\n@@ -20 +20 @@\n-${FIX.buggy}\n+${FIX.fixed}\n` : '', code: 0 }
    }
    const script = /path = pathlib\.Path\((".*?")\)[\s\S]*text\.replace\((".*?"), (".*?"), 1\)/.exec(command)
    if (script) {
      const path = JSON.parse(script[1]!) as string
      this.files.set(path, (this.files.get(path) ?? '').replace(JSON.parse(script[2]!), JSON.parse(script[3]!)))
      return { output: '', code: 0 }
    }
    return { output: `bash: unexpected command in this simulation: ${command}\n`, code: 127 }
  }

  private pytest(command: string): { output: string; code: number } {
    const broken = this.files.get('stats/core.py')?.includes(FIX.buggy) ?? true
    const focused = command.includes('::')
    if (!broken) return { output: `${focused ? '.' : '.....'}  [100%]\n${focused ? 1 : 5} passed in 0.02s\n`, code: 0 }
    const failure = [
      '=================================== FAILURES ===================================',
      '_______________________________ test_median_even _______________________________',
      '',
      '    def test_median_even():',
      '>       assert median([4, 1, 3, 2]) == 2.5',
      'E       assert 3.5 == 2.5',
      'E        +  where 3.5 = median([4, 1, 3, 2])',
      '',
      'test_stats.py:15: AssertionError',
      '=========================== short test summary info ============================',
      'FAILED test_stats.py::test_median_even - assert 3.5 == 2.5',
    ].join('\n')
    return { output: `${focused ? 'F' : '..F..'}  [100%]\n${failure}\n${focused ? '1 failed' : '1 failed, 4 passed'} in 0.03s\n`, code: 1 }
  }

  private formatShell(command: string, { output, code }: { output: string; code: number }): string {
    switch (this.family) {
      case 'codex':
        return `Chunk ID: 1a2b3c\nWall time: 0.0312 seconds\nProcess exited with code ${code}\nOriginal token count: ${output.length >> 2}\nOutput:\n${output}`
      case 'gemini':
        return JSON.stringify({ output: `Output: ${output}${code === 0 ? '' : `\nExit Code: ${code}`}` })
      case 'qwen':
        return `Command: ${command}\nDirectory: (root)\nOutput: ${output.trim() || '(empty)'}\nError: (none)\nExit Code: ${code}`
      default:
        return code === 0 ? output : `${output}\n\nCommand exited with code ${code}`
    }
  }
}

const TOOL_SETS = recordedToolSets()
const VARIANTS = [...TOOL_SETS.keys()].sort()

describe('solver policy over every recorded harness tool set', () => {
  it('covers the six harnesses', () => {
    const families = new Set(VARIANTS.map(familyOf))
    expect([...families].sort()).toEqual(['claude', 'codex', 'gemini', 'opencode', 'pi', 'qwen'])
  })

  for (const variant of VARIANTS) {
    it(`${variant}: lists, reads, runs the tests, edits only after a failure, verifies, finishes`, () => {
      const harness = new SimulatedHarness(familyOf(variant), TOOL_SETS.get(variant)!, createSolverPolicy({ delegate: false }), 7)
      const { final, texts } = harness.converse(INSTRUCTION, 'main', harness.tools)
      expect(harness.files.get('stats/core.py')).toContain(FIX.fixed)
      expect(final).toMatch(/passes now/)
      expect(harness.calls).toBeGreaterThanOrEqual(10)
      expect(harness.calls).toBeLessThanOrEqual(30)
      const results = harness.log.map((entry) => entry.result)
      const firstFailure = results.findIndex((result) => /1 failed/.test(result))
      const firstEdit = harness.log.findIndex(
        (entry) =>
          /Edit applied|Successfully modified|Success\. Updated/.test(entry.result) || /write_text/.test(JSON.stringify(entry.args)),
      )
      expect(firstFailure).toBeGreaterThanOrEqual(0)
      expect(firstEdit).toBeGreaterThan(firstFailure)
      // Passing test output is the last thing before the diff and the summary.
      expect(results.slice(firstEdit).some((result) => /5 passed/.test(result))).toBe(true)
      // Reasoning on the turns (thinking is on) and some plain text next to tool calls.
      expect(texts.every((text) => /^<think>\n.+\n<\/think>\n\n/s.test(text))).toBe(true)
    })
  }

  const delegating = VARIANTS.filter((variant) =>
    toToolSpecs(TOOL_SETS.get(variant)!.tools).some((tool) => /^(?:task|agent|invoke_agent)$/i.test(tool.name)),
  )

  it('finds a sub-agent tool in Claude Code, opencode, Qwen Code and Gemini CLI', () => {
    expect(new Set(delegating.map(familyOf))).toEqual(new Set(['claude', 'opencode', 'qwen', 'gemini']))
  })

  for (const variant of delegating) {
    it(`${variant} (solver-subagent): delegates locating the defect to a sub-agent, then fixes it`, () => {
      const harness = new SimulatedHarness(familyOf(variant), TOOL_SETS.get(variant)!, createSolverPolicy({ delegate: true }), 7)
      const { final } = harness.converse(INSTRUCTION, 'main', harness.tools)
      expect(final).toMatch(/passes now/)
      expect(harness.files.get('stats/core.py')).toContain(FIX.fixed)
      const delegation = harness.log.find((entry) => /^(?:task|agent|invoke_agent)$/i.test(entry.name))
      expect(String(delegation?.args.prompt)).toContain(DELEGATION_PHRASE)
      expect(delegation?.result).toContain(FIX.buggy.trim())
      expect(harness.subagentCalls).toBeGreaterThanOrEqual(2)
      expect(harness.log.some((entry) => entry.agent === 'sub' && /stats\/core\.py/.test(JSON.stringify(entry.args)))).toBe(true)
      expect(harness.calls + harness.subagentCalls).toBeLessThanOrEqual(30)
      if (familyOf(variant) === 'gemini') {
        expect(harness.nudges).toBe(0)
        expect(harness.subagentCalls).toBe(3)
      }
    })
  }

  it('is deterministic for a seed', () => {
    const run = (seed: number) => {
      const harness = new SimulatedHarness('pi', TOOL_SETS.get('pi')!, createSolverPolicy({ delegate: false }), seed)
      return harness.converse(INSTRUCTION, 'main', harness.tools).texts
    }
    expect(run(3)).toEqual(run(3))
  })

  it('finishes without editing when the suite already passes', () => {
    const harness = new SimulatedHarness('pi', TOOL_SETS.get('pi')!, createSolverPolicy({ delegate: false }), 1)
    harness.files.set('stats/core.py', harness.files.get('stats/core.py')!.replace(FIX.buggy, FIX.fixed))
    const { final } = harness.converse(INSTRUCTION, 'main', harness.tools)
    expect(final).toMatch(/already pass/)
    expect(harness.log.some((entry) => /edit/i.test(entry.name))).toBe(false)
  })

  it('retries with a shell script when the harness rejects the edit', () => {
    const harness = new SimulatedHarness('claude', TOOL_SETS.get('claude-code')!, createSolverPolicy({ delegate: false }), 1)
    harness.rejectNextEdit = true
    const { final } = harness.converse(INSTRUCTION, 'main', harness.tools)
    expect(final).toMatch(/passes now/)
    expect(harness.log.some((entry) => /write_text/.test(JSON.stringify(entry.args)))).toBe(true)
  })

  it('runs the listing and the test suite again when the harness lost their output (Qwen Code "Output: (empty)")', () => {
    const harness = new SimulatedHarness('qwen', TOOL_SETS.get('qwen-code')!, createSolverPolicy({ delegate: false }), 5)
    harness.loseOutputOnce = ['pwd && find', 'python3 -m pytest -q']
    const { final } = harness.converse(INSTRUCTION, 'main', harness.tools)
    expect(final).toMatch(/passes now/)
    expect(harness.files.get('stats/core.py')).toContain(FIX.fixed)
    const shellResults = harness.log.filter((entry) => entry.name === 'run_shell_command').map((entry) => entry.result)
    expect(shellResults[0]).toMatch(/^Command: pwd && find .*\nDirectory: \(root\)\nOutput: \(empty\)\n/)
    expect(shellResults[1]).toContain('./test_stats.py')
    expect(harness.loseOutputOnce).toEqual([])
  })

  it('runs the listing again when only its pwd line came back (the tool result a failing npm test run recorded)', () => {
    const policy = createSolverPolicy({ delegate: false })
    const recorded = TOOL_SETS.get('qwen-code')!
    const command = "pwd && find . -type f -not -path './.git/*' -not -name '*.pyc' | sort"
    // Verbatim from a rejected attempt's transcript (generate-sft in a full npm test under load, 2026-11-25).
    const lost = `Command: ${command}\nDirectory: (root)\nOutput: /polar/session/workspace\nError: (none)\nExit Code: 0\nSignal: (none)\nProcess Group PGID: (none)`
    const messages: TemplateMessage[] = [
      { role: 'system', content: recorded.system },
      { role: 'user', content: INSTRUCTION },
      {
        role: 'assistant',
        content: '',
        tool_calls: [{ id: 'c1', type: 'function', function: { name: 'run_shell_command', arguments: { command } } }],
      },
      { role: 'tool', tool_call_id: 'c1', content: lost },
    ]
    const { text } = policy.generate({
      messages,
      tools: toToolSpecs(recorded.tools),
      enableThinking: true,
      responseFormat: null,
      rng: createRng(5),
    })
    const parsed = parseAssistantOutput(text, { parseToolCalls: true })
    expect(parsed.content ?? '').not.toMatch(/could not find any Python test files/)
    expect(parsed.toolCalls.map((call) => JSON.parse(call.arguments).command)).toEqual([command])
  })

  it('gives up on a listing without any file only after running it twice', () => {
    const harness = new SimulatedHarness('qwen', TOOL_SETS.get('qwen-code')!, createSolverPolicy({ delegate: false }), 5)
    harness.loseOutputOnce = ['pwd && find', 'pwd && find']
    expect(harness.converse(INSTRUCTION, 'main', harness.tools).final).toMatch(/could not find any Python test files/)
    expect(harness.calls).toBe(3)
  })

  it('without a shell tool, says so instead of guessing', () => {
    const tools = TOOL_SETS.get('pi')!.tools.filter((tool) => toToolSpecs([tool])[0]?.name !== 'bash')
    const harness = new SimulatedHarness('pi', { ...TOOL_SETS.get('pi')!, tools }, createSolverPolicy({ delegate: false }), 1)
    expect(harness.converse(INSTRUCTION, 'main', tools).final).toMatch(/none of the available tools runs shell commands/)
  })
})
