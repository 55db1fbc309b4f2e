/**
 * `rollgate generate-sft` end to end: the real CLI starts its own stack (wrangler dev + a local runner on
 * the bubblewrap runtime), runs the `tasks/fix-stats` task with Qwen Code (the pinned devDependency)
 * against the stand-in engine, grades with `test_on_output` (patch replayed in a fresh runtime), and
 * writes SFT JSONL. The `solver` policy fixes the bug (accepted, SFT lines written); the `scripted`
 * policy only creates a file (rejected, exit 1, nothing written).
 */
import { spawn } from 'node:child_process'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { GenerateSftSummary } from '../../cli/commands/generate-sft.ts'
import type { AttemptTranscript } from '../../cli/lib/attempt-transcript.ts'
import { type EngineHandle, startEngine } from '../../engine/server.ts'

const ROOT = join(import.meta.dirname, '../..')
let engine: EngineHandle
let out: string

beforeAll(async () => {
  // A 32K window as a real vLLM's: Qwen Code asks for 32,768 output tokens, which the edge lowers to fit.
  engine = await startEngine({ port: 0, seed: 5, policy: 'solver', maxModelLen: 32_768 })
  out = await mkdtemp(join(tmpdir(), 'rollgate-sft-'))
})
afterAll(async () => {
  await engine?.close()
  await rm(out, { recursive: true, force: true })
})

function generateSft(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(ROOT, 'cli/rollgate.ts'), 'generate-sft', ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString()
    })
    child.stderr.on('data', (chunk: Buffer) => {
      stderr = (stderr + chunk.toString()).slice(-20_000)
    })
    child.on('error', reject)
    child.on('exit', (code) => resolve({ code, stdout, stderr }))
  })
}

const lines = async (file: string) => (await readFile(file, 'utf8')).split('\n').filter(Boolean)

function parseSummary(stdout: string): GenerateSftSummary | null {
  try {
    return JSON.parse(stdout) as GenerateSftSummary
  } catch {
    return null
  }
}

/** Why attempts were rejected: each one's result line and the transcript the CLI kept (read only on failure). */
async function rejections(summary: GenerateSftSummary): Promise<string> {
  const rejected = summary.results.filter((attempt) => !attempt.accepted)
  const parts = await Promise.all(
    rejected.map(async (attempt) => {
      const transcript = attempt.transcript === null ? '(no transcript)' : await readFile(attempt.transcript, 'utf8').catch(String)
      return `${JSON.stringify(attempt)}\ntranscript ${attempt.transcript}:\n${transcript}`
    }),
  )
  return parts.join('\n\n')
}

describe('rollgate generate-sft', () => {
  it('keeps the attempts the evaluator accepts and writes SFT JSONL in message and token form', { timeout: 400_000 }, async () => {
    const dir = join(out, 'solved')
    const task = join(ROOT, 'tasks/fix-stats/task.json')
    const run = await generateSft([
      '--task',
      task,
      '--attempts',
      '2',
      '--upstream',
      engine.url,
      '--kind',
      'vllm',
      '--out',
      dir,
      '--json',
      '--timeout',
      '300',
    ])
    const summary = parseSummary(run.stdout)
    // A rejected attempt (or two: exit 1) shows its transcript in the failure message.
    const why = summary === null || summary.accepted === summary.attempts ? '' : await rejections(summary)
    expect(run.code, `${run.stderr}\n${why}`).toBe(0)
    if (summary === null) throw new Error(`no JSON summary on stdout: ${run.stdout}`)
    expect(summary, `${JSON.stringify(summary.results)}\n${why}`).toMatchObject({
      attempts: 2,
      accepted: 2,
      acceptance_rate: 1,
      threshold: 1,
    })
    // One row per trace of each accepted attempt (more than one when prefix_merging had to break a chain).
    expect(summary.sft_lines).toBeGreaterThanOrEqual(2)
    expect(summary.sft_token_lines).toBe(summary.sft_lines)
    expect(summary.results.every((attempt) => attempt.status === 'COMPLETED' && attempt.reward === 1)).toBe(true)

    const messages = (await lines(summary.files.sft)).map((line) => JSON.parse(line) as { messages: Array<Record<string, unknown>> })
    expect(messages).toHaveLength(summary.sft_lines)
    // The agent's edit of the defective line is in the training data; every row ends with an assistant turn.
    expect(
      messages.filter((example) => JSON.stringify(example.messages).includes('ordered[middle - 1] + ordered[middle]')).length,
    ).toBeGreaterThanOrEqual(2)
    for (const example of messages) expect(example.messages.at(-1)).toMatchObject({ role: 'assistant' })
    const tokens = (await lines(summary.files.sft_tokens!)).map((line) => JSON.parse(line) as { input_ids: number[]; loss_mask: number[] })
    expect(tokens).toHaveLength(summary.sft_lines)
    for (const example of tokens) {
      expect(example.loss_mask).toHaveLength(example.input_ids.length)
      expect(example.loss_mask).toContain(1)
    }
    expect((await lines(summary.files.attempts)).map((line) => JSON.parse(line).accepted)).toEqual([true, true])
    // 11 model calls per attempt reached the engine, through the edge.
    expect(engine.stats().requests.chat_completions).toBeGreaterThanOrEqual(22)
  })

  it('rejects attempts below the threshold: exit 1, no SFT lines', { timeout: 400_000 }, async () => {
    engine.setPolicy({ policy: 'scripted' })
    const dir = join(out, 'unsolved')
    const task = join(ROOT, 'tasks/fix-stats/task.json')
    const run = await generateSft(['--task', task, '--attempts', '1', '--upstream', engine.url, '--out', dir, '--json', '--timeout', '300'])
    expect(run.code, run.stderr).toBe(1)
    const summary = JSON.parse(run.stdout) as GenerateSftSummary
    expect(summary).toMatchObject({ attempts: 1, accepted: 0, acceptance_rate: 0, sft_lines: 0 })
    expect(summary.results[0]).toMatchObject({ status: 'COMPLETED', reward: 0, accepted: false })
    expect(await readFile(summary.files.sft, 'utf8')).toBe('')
    // The rejected attempt's transcript: the scripted policy's answers and the last request's messages.
    const transcript = JSON.parse(await readFile(summary.results[0]!.transcript!, 'utf8')) as AttemptTranscript
    expect(transcript.session_id).toBe(summary.results[0]!.session_id)
    expect(transcript.calls.length).toBeGreaterThanOrEqual(1)
    expect(transcript.last_request_messages.map((message) => message.role)).toContain('user')
  })

  it('says clearly when the upstream is not there', async () => {
    const run = await generateSft([
      '--task',
      join(ROOT, 'tasks/fix-stats/task.json'),
      '--attempts',
      '1',
      '--upstream',
      'http://127.0.0.1:9',
    ])
    expect(run.code).toBe(2)
    expect(run.stderr).toMatch(/cannot reach the upstream at http:\/\/127\.0\.0\.1:9\/v1\/models/)
  })
})
