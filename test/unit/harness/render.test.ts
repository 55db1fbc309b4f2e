/**
 * Golden rendered configs: every harness × variant rendered from one fixed input must equal its committed
 * file `golden/<variant>.json` (files, env, steps, teardown). A missing golden fails (it is never written
 * silently); regenerate on purpose with `ROLLGATE_UPDATE_GOLDEN=1 npx vitest run --project unit test/unit/harness`.
 * Also: the rendered commands survive a real shell (instruction quoting), variant/model resolution, agent env
 * precedence, and clear errors for what a module does not render.
 */
import { spawnSync } from 'node:child_process'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { HARNESSES, getHarness, harnessOfVariant } from '../../../runner/harness/index.ts'
import type { HarnessInput } from '../../../runner/harness/harness.ts'
import { shellQuote } from '../../../runner/harness/common.ts'
import { agentSpecSchema } from '../../../src/contract/rollout.ts'

const GOLDEN_DIR = join(import.meta.dirname, 'golden')
const UPDATE = process.env.ROLLGATE_UPDATE_GOLDEN === '1'

function input(harness: string, overrides: Partial<HarnessInput> = {}, agent: Record<string, unknown> = {}): HarnessInput {
  return {
    instruction: 'create hello.txt containing hi',
    edgeUrl: 'http://127.0.0.1:18080',
    token: 'rg_golden.token',
    agent: agentSpecSchema.parse({
      harness,
      ...(harness === 'shell' ? { custom_shell: { command: 'my-agent run --task {instruction} --out /polar/session/artifacts' } } : {}),
      ...agent,
    }),
    sessionDir: '/polar/session',
    homeDir: '/polar/session/home',
    workDir: '/workspace',
    ...overrides,
  }
}

const cases = Object.values(HARNESSES).flatMap((harness) => harness.variants.map((variant) => ({ harness, variant })))

describe('golden rendered configs', () => {
  it('covers the 16 recorded CLI variants plus shell', () => {
    expect(cases.map((c) => c.variant.id).sort()).toEqual(
      [
        'claude-code',
        'claude-code-nonessential',
        'codex',
        'codex-builtin',
        'gemini-cli',
        'opencode',
        'opencode-anthropic',
        'opencode-google',
        'opencode-responses',
        'pi',
        'pi-anthropic',
        'pi-google',
        'pi-responses',
        'qwen-code',
        'qwen-code-anthropic',
        'qwen-code-gemini',
        'shell',
      ].sort(),
    )
  })

  it.each(cases.map((c) => [c.variant.id, c] as const))('%s', (_id, { harness, variant }) => {
    const plan = harness.render(input(harness.name, { variant: variant.id }))
    const rendered = { harness: harness.name, pkg: harness.pkg, variant, plan }
    const file = join(GOLDEN_DIR, `${variant.id}.json`)
    const text = `${JSON.stringify(rendered, null, 2)}\n`
    if (UPDATE) writeFileSync(file, text)
    expect(existsSync(file), `golden file ${file} is missing (ROLLGATE_UPDATE_GOLDEN=1 writes it)`).toBe(true)
    expect(text).toBe(readFileSync(file, 'utf8'))
  })
})

describe('rendering rules', () => {
  it('passes any instruction through a real shell unchanged', () => {
    const nasty = `it's "quoted" $HOME \`id\` ; rm -rf / & {x} \\ \n new line`
    expect(spawnSync('bash', ['-c', `printf %s ${shellQuote(nasty)}`], { encoding: 'utf8' }).stdout).toBe(nasty)
    // The CLI sees the instruction as one argument: run the rendered command with a stand-in CLI that prints it.
    const plan = getHarness('pi').render(input('pi', { instruction: nasty, cliPath: '/bin/echo' }))
    const printed = spawnSync('bash', ['-c', plan.steps[0]!.command], { encoding: 'utf8' }).stdout
    expect(printed).toBe(`--offline --no-session --provider rollgate --model test-model -p ${nasty}\n`)
    const shellPlan = getHarness('shell').render(
      input('shell', { instruction: nasty }, { custom_shell: { command: 'printf %s {instruction}' } }),
    )
    expect(spawnSync('bash', ['-c', shellPlan.steps[0]!.command], { encoding: 'utf8' }).stdout).toBe(nasty)
  })

  it('keeps option-like words of the instruction away from the CLI parser (opencode takes words after --)', () => {
    const plan = getHarness('opencode').render(input('opencode', { instruction: 'make `python3 -m pytest -q` pass', cliPath: '/bin/echo' }))
    const printed = spawnSync('bash', ['-c', plan.steps[0]!.command], { encoding: 'utf8' }).stdout
    expect(printed).toBe('run --print-logs -- make `python3 -m pytest -q` pass\n')
  })

  it('runs the CLI path given, else the bare bin name', () => {
    expect(getHarness('qwen_code').render(input('qwen_code')).steps[0]!.command.startsWith('qwen --yolo')).toBe(true)
    const plan = getHarness('qwen_code').render(input('qwen_code', { cliPath: '/opt/harness cache/bin/qwen' }))
    expect(plan.steps[0]!.command.startsWith(`'/opt/harness cache/bin/qwen' --yolo`)).toBe(true)
  })

  it('asks for the input model, else the agent model_name, else the variant default', () => {
    const env = (overrides: Partial<HarnessInput>, agent: Record<string, unknown> = {}) =>
      getHarness('qwen_code').render(input('qwen_code', overrides, agent)).env.OPENAI_MODEL
    expect(env({})).toBe('qwen3-coder-plus')
    expect(env({}, { model_name: 'Qwen/Qwen3-8B' })).toBe('Qwen/Qwen3-8B')
    expect(env({ model: 'served' }, { model_name: 'Qwen/Qwen3-8B' })).toBe('served')
    const claude = getHarness('claude_code').render(input('claude_code', {}, { model_name: 'm1' }))
    expect(claude.steps[0]!.command).toContain('--model m1')
    expect(claude.env.CLAUDE_CODE_SUBAGENT_MODEL).toBe('m1')
  })

  it('asks opencode-google for a model id without "/" (the Google SDK would build a path no route matches)', () => {
    const config = (variant: string) =>
      JSON.parse(getHarness('opencode').render(input('opencode', { variant, model: 'Qwen/Qwen3-8B' })).files[0]!.content) as {
        model: string
      }
    expect(config('opencode-google').model).toBe('rollgate/Qwen3-8B')
    expect(config('opencode').model).toBe('rollgate/Qwen/Qwen3-8B')
  })

  it("lets the agent spec's env win and keeps the session token as every key", () => {
    const plan = getHarness('pi').render(input('pi', {}, { env: { PI_TELEMETRY: '1', EXTRA: 'x' } }))
    expect(plan.env).toMatchObject({ PI_TELEMETRY: '1', EXTRA: 'x', ROLLGATE_API_KEY: 'rg_golden.token', HOME: '/polar/session/home' })
  })

  it('rejects unknown harnesses and variants, and options a module does not render', () => {
    expect(() => getHarness('aider')).toThrow(/unknown harness "aider"/)
    expect(() => getHarness('pi').render(input('pi', { variant: 'pi-bedrock' }))).toThrow(/no variant "pi-bedrock".*pi-anthropic/)
    expect(() =>
      getHarness('codex').render(input('codex', {}, { mcp_servers: [{ name: 'fs', transport: 'stdio', command: 'mcp-fs' }] })),
    ).toThrow(/mcp_servers/)
    expect(harnessOfVariant('opencode-google').harness.name).toBe('opencode')
  })

  it('writes Polar-style steps: stdin closed, cwd the work dir, shell cwd/env from custom_shell', () => {
    for (const { harness, variant } of cases.filter((c) => c.harness.pkg !== null)) {
      const plan = harness.render(input(harness.name, { variant: variant.id }))
      expect(plan.steps.length).toBeGreaterThan(0)
      for (const step of plan.steps) {
        expect(step.command.endsWith('</dev/null'), `${variant.id}: ${step.command}`).toBe(true)
        expect(step.cwd).toBe('/workspace')
      }
    }
    const plan = getHarness('shell').render(
      input('shell', {}, { custom_shell: { command: 'run {instruction}', cwd: '/src', env: { OPENAI_API_KEY: 'override' } } }),
    )
    expect(plan.steps[0]).toMatchObject({ cwd: '/src', command: `run 'create hello.txt containing hi'` })
    expect(plan.env.OPENAI_API_KEY).toBe('override')
    expect(plan.env.ANTHROPIC_API_KEY).toBe('rg_golden.token')
  })
})
