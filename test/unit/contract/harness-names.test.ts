/** Submit refuses a harness no runner has (400 `agent.harness`), and only then: the known names and `import_path` tasks pass. */
import { describe, expect, it } from 'vitest'
import { HARNESS_NAMES, isHarnessName } from '../../../src/contract/harness-names.ts'
import { taskRequestSchema } from '../../../src/contract/rollout.ts'

const task = (agent: Record<string, unknown>) => ({ task_id: 't1', instruction: 'fix it', agent })

describe('harness names', () => {
  it('knows exactly the runner’s harnesses', () => {
    expect([...HARNESS_NAMES].sort()).toEqual(['claude_code', 'codex', 'gemini_cli', 'opencode', 'pi', 'qwen_code', 'shell'])
    for (const name of HARNESS_NAMES) expect(isHarnessName(name)).toBe(true)
    for (const name of ['', 'claude-code', 'Codex', 'codex ', 'qwen', 'constructor', 'toString']) expect(isHarnessName(name)).toBe(false)
  })

  it('a task naming an unknown harness is refused at agent.harness, listing the known ones', () => {
    const result = taskRequestSchema.safeParse(task({ harness: 'claude-code' }))
    expect(result.success).toBe(false)
    expect(result.error?.issues).toEqual([
      expect.objectContaining({
        code: 'custom',
        path: ['agent', 'harness'],
        message: 'unknown harness "claude-code" (known: codex, claude_code, gemini_cli, qwen_code, opencode, pi, shell)',
      }),
    ])
  })

  it('a known harness, and a task with an import_path instead of a harness, pass', () => {
    expect(taskRequestSchema.safeParse(task({ harness: 'qwen_code' })).success).toBe(true)
    expect(taskRequestSchema.safeParse(task({ import_path: 'my_agents.solver:Agent' })).success).toBe(true)
  })
})
