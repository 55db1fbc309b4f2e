/**
 * Exports (Polar SessionResult/TaskResult, slime/Miles samples, NeMo Gym rows, SFT rows), the R2
 * key helper, and the CLI.
 */
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { sessionResultSchema, type Trajectory } from '../../src/contract/trajectory.ts'
import {
  applyEvalResult,
  groupAdvantages,
  RolloutLogprobError,
  reconstructTrajectory,
  toNemoGymRows,
  toSessionResult,
  toSftRows,
  toSftTokenRows,
  toSlimeSamples,
  toTaskResult,
  trajectoryObjectKey,
  trajectoryObjectPrefix,
} from '../../src/reconstruct/index.ts'
import { main, runCli } from '../../scripts/reconstruct.ts'
import { makeRecord, withPreviousDeltas } from './reconstruct-support/records.ts'
import { slimeFromDictSchema, slimeFullRowSchema } from './reconstruct-support/slime-sample.ts'

const EOT = 99
const records = withPreviousDeltas([
  makeRecord({
    seq: 0,
    prompt: [1, 2, 3],
    response: [10, 11, EOT],
    logprobs: [-0.1, -0.2, -0.3],
    messages: [{ role: 'user', content: 'fix it' }],
    responseMessage: {
      role: 'assistant',
      content: '',
      reasoning_content: 'look first',
      tool_calls: [{ id: 'c1', type: 'function', function: { name: 'bash', arguments: '{"command":"ls"}' } }],
    },
    finish: 'tool_calls',
  }),
  makeRecord({
    seq: 1,
    prompt: [1, 2, 3, 10, 11, EOT, 50, 51],
    response: [20, 21, EOT],
    logprobs: [-0.5, -0.6, -0.7],
    messages: [
      { role: 'user', content: 'fix it' },
      { role: 'assistant', content: '' },
      { role: 'tool', tool_call_id: 'c1', content: 'a.ts' },
    ],
    responseMessage: { role: 'assistant', content: 'done' },
  }),
])
const session = {
  session_id: 'sess-1',
  task_id: 'task-1',
  metadata: { group_id: 'g-1', policy_version: 3 },
}
const merged = () =>
  applyEvalResult(reconstructTrajectory(records, { builder: 'prefix_merging', session }), {
    outcome_reward: 1,
    trace_rewards: null,
    metadata: {},
  })

describe('Polar results', () => {
  it('SessionResult parses with the contract; status from the trajectory; timing from the log outside a task', () => {
    const result = toSessionResult(merged())
    expect(sessionResultSchema.parse(result)).toEqual(result)
    // Both calls start at 00:00:00.000 and take 2 ms (makeRecord): run_ms is the span of the calls.
    expect(result.trajectory.metadata.capture_timing).toEqual({
      first_completion_at: '2026-01-01T00:00:00.000Z',
      last_completion_at: '2026-01-01T00:00:00.002Z',
      wall_ms: 2,
      model_ms: 2,
      completions: 2,
    })
    expect(toSessionResult(merged(), { timing: { init_ms: 5 } }).timing).toEqual({
      register_to_init_queue_ms: 0,
      init_ms: 5,
      run_ms: 0,
      postrun_ms: 0,
    })
    expect(result).toMatchObject({
      session_id: 'sess-1',
      task_id: 'task-1',
      status: 'COMPLETED',
      timing: { register_to_init_queue_ms: 0, init_ms: 0, run_ms: 2, postrun_ms: 0 },
      node_id: null,
      error: null,
      metadata: session.metadata,
    })
    const failed = toSessionResult({ ...merged(), status: 'TIMEOUT', error: 'agent timeout' })
    expect(failed).toMatchObject({ status: 'TIMEOUT', error: 'agent timeout' })
  })

  it('TaskResult status: completed / failed / running', () => {
    const ok = toSessionResult(merged())
    const bad = toSessionResult({ ...merged(), status: 'ERROR', error: 'x' })
    expect(toTaskResult('task-1', [ok, bad]).status).toBe('completed')
    expect(toTaskResult('task-1', [bad]).status).toBe('failed')
    expect(toTaskResult('task-1', [ok, { ...bad, status: 'RUNNING' }]).status).toBe('running')
    expect(toTaskResult('task-1', [ok], { result_paths: ['a.json'] }).result_paths).toEqual(['a.json'])
  })
})

describe('slime / Miles samples', () => {
  it('one sample per trace with Polar’s field rules', () => {
    const [sample] = toSlimeSamples(toSessionResult(merged()), {
      group_index: 4,
      trajectory_index: 2,
    })
    expect(sample).toMatchObject({
      group_index: 4,
      index: 2,
      group_id: 2,
      tokens: [1, 2, 3, 10, 11, EOT, 50, 51, 20, 21, EOT],
      response_length: 8,
      loss_mask: [1, 1, 1, 0, 0, 1, 1, 1],
      rollout_log_probs: [-0.1, -0.2, -0.3, 0, 0, -0.5, -0.6, -0.7],
      reward: { score: 1 },
      status: 'completed',
      session_id: 'sess-1',
      remove_sample: false,
    })
    expect(sample?.metadata.polar).toMatchObject({
      trace_index: 0,
      group_id: 'g-1',
      policy_version: 3,
    })
    expect(sample?.response).toContain('bash({"command":"ls"})')
  })

  it('status: TIMEOUT→ABORTED, ERROR→FAILED (masks zeroed), length→TRUNCATED', () => {
    const result = toSessionResult(merged())
    const statusOf = (trajectory: Trajectory) => toSlimeSamples({ ...result, trajectory }, { group_index: 0, trajectory_index: 0 })[0]
    const aborted = statusOf({ ...result.trajectory, status: 'TIMEOUT' })
    expect(aborted?.status).toBe('aborted')
    expect(aborted?.loss_mask.every((v) => v === 0)).toBe(true)
    expect(statusOf({ ...result.trajectory, status: 'ERROR' })?.status).toBe('failed')
    expect(statusOf({ ...result.trajectory, error: 'evaluator failed' })?.status).toBe('failed')
    const truncated = {
      ...result.trajectory,
      traces: result.trajectory.traces.map((t) => ({ ...t, finish_reason: 'length' })),
    }
    expect(statusOf(truncated)?.status).toBe('truncated')
  })

  it('rows load with slime Sample.from_dict semantics and spell out every Sample field', () => {
    const result = toSessionResult(merged())
    const rows = [
      ...toSlimeSamples(result, { group_index: 0, trajectory_index: 0 }),
      ...toSlimeSamples(
        { ...result, status: 'TIMEOUT', trajectory: { ...result.trajectory, status: 'TIMEOUT' } },
        { group_index: 0, trajectory_index: 1 },
      ),
      ...toSlimeSamples({ ...result, status: 'ERROR', error: 'x' }, { group_index: 0, trajectory_index: 2 }),
      ...toSlimeSamples(result, { group_index: 0, trajectory_index: 3, max_tokens: 5 }),
    ]
    expect(rows.map((row) => row.status)).toEqual(['completed', 'aborted', 'failed', 'aborted'])
    for (const row of rows) {
      // Through JSON, as a JSONL reader sees it.
      const parsed = JSON.parse(JSON.stringify(row))
      expect(slimeFromDictSchema.safeParse(parsed).error).toBeUndefined()
      expect(slimeFullRowSchema.safeParse(parsed).error).toBeUndefined()
      expect(parsed.loss_mask).toHaveLength(parsed.response_length)
      expect(parsed.rollout_log_probs).toHaveLength(parsed.response_length)
    }
    expect(rows[3]).toMatchObject({ remove_sample: true, weight_versions: [], spec_info: { spec_verify_ct: 0 } })
    // The loader rejects Polar-era upper-case statuses.
    expect(slimeFromDictSchema.safeParse({ ...rows[0], status: 'COMPLETED' }).success).toBe(false)
  })

  it('trainable trace without logprobs → RolloutLogprobError; not for failed ones', () => {
    const result = toSessionResult(merged())
    const noLogprobs = {
      ...result.trajectory,
      traces: result.trajectory.traces.map((t) => ({ ...t, response_logprobs: null })),
    }
    expect(() => toSlimeSamples({ ...result, trajectory: noLogprobs }, { group_index: 0, trajectory_index: 0 })).toThrow(
      RolloutLogprobError,
    )
    const failed = toSlimeSamples(
      { ...result, status: 'ERROR', trajectory: { ...noLogprobs, status: 'ERROR' } },
      { group_index: 0, trajectory_index: 0 },
    )
    expect(failed[0]?.rollout_log_probs.every((v) => v === 0)).toBe(true)
  })

  it('over-long traces are dropped; none left → one fully masked placeholder', () => {
    const samples = toSlimeSamples(toSessionResult(merged()), {
      group_index: 1,
      trajectory_index: 0,
      max_tokens: 5,
    })
    expect(samples).toEqual([
      expect.objectContaining({
        tokens: [0, 0],
        loss_mask: [0],
        remove_sample: true,
        status: 'aborted',
        reward: { score: 0 },
      }),
    ])
  })

  it('group advantages can be attached per sample', () => {
    const a = merged()
    const b = applyEvalResult(a, { outcome_reward: 0, trace_rewards: null, metadata: {} })
    const { advantages } = groupAdvantages([a, b])
    const [sample] = toSlimeSamples(toSessionResult(a), {
      group_index: 0,
      trajectory_index: 0,
      advantages: advantages[0],
    })
    expect(sample?.advantage).toBe(1)
  })
})

describe('NeMo Gym rows', () => {
  it('one output message per sampled round, prompts extending each other', () => {
    const [row] = toNemoGymRows(merged())
    const output = row?.response.output ?? []
    expect(output).toHaveLength(2)
    expect(output[0]).toMatchObject({
      type: 'message',
      role: 'assistant',
      prompt_token_ids: [1, 2, 3],
      generation_token_ids: [10, 11, EOT],
      generation_log_probs: [-0.1, -0.2, -0.3],
    })
    expect(output[1]).toMatchObject({
      prompt_token_ids: [1, 2, 3, 10, 11, EOT, 50, 51],
      generation_token_ids: [20, 21, EOT],
      generation_log_probs: [-0.5, -0.6, -0.7],
      content: [{ type: 'output_text', text: 'done', annotations: [] }],
    })
    expect(row).toMatchObject({ session_id: 'sess-1', reward: 1, branch: 'main' })
  })

  it('falls back to mask-1 runs for traces without turn metadata', () => {
    const trajectory = merged()
    const bare = { ...trajectory, traces: trajectory.traces.map((t) => ({ ...t, metadata: {} })) }
    const output = toNemoGymRows(bare)[0]?.response.output ?? []
    expect(output.map((m) => m.generation_token_ids)).toEqual([
      [10, 11, EOT],
      [20, 21, EOT],
    ])
  })
})

describe('SFT rows', () => {
  it('OpenAI chat shape: prompt messages, then assistant turns and tool results', () => {
    const [row] = toSftRows(merged())
    expect(row?.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'assistant'])
    expect(row?.messages[1]).toMatchObject({ reasoning_content: 'look first' })
    expect(toSftRows(merged(), { include_reasoning: false })[0]?.messages[1]).not.toHaveProperty('reasoning_content')
    expect(row?.tools).toEqual([{ type: 'function', function: { name: 'bash', parameters: {} } }])
    expect(toSftRows(merged(), { branches: ['sub_agent'] })).toEqual([])
    expect(toSftRows(merged(), { min_reward: 2 })).toEqual([])
  })

  it('token variant: whole sequence, prompt positions masked', () => {
    const [row] = toSftTokenRows(merged())
    expect(row?.input_ids).toEqual([1, 2, 3, 10, 11, EOT, 50, 51, 20, 21, EOT])
    expect(row?.loss_mask).toEqual([0, 0, 0, 1, 1, 1, 0, 0, 1, 1, 1])
    expect(row?.prompt_length).toBe(3)
  })
})

describe('R2 key layout', () => {
  it('trajectories/<session_id>/<builder>.json with the id percent-encoded', () => {
    expect(trajectoryObjectKey('sess-1', 'prefix_merging')).toBe('trajectories/sess-1/prefix_merging.json')
    expect(trajectoryObjectKey('a/../b', 'per_request')).toBe('trajectories/a%2F..%2Fb/per_request.json')
    expect(trajectoryObjectPrefix('sess-1')).toBe('trajectories/sess-1/')
    expect(() => trajectoryObjectKey('', 'per_request')).toThrow()
    expect(() => trajectoryObjectKey('..', 'per_request')).toThrow()
    expect(() => trajectoryObjectKey('s', 'strict' as never)).toThrow()
  })
})

describe('CLI (scripts/reconstruct.ts)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'reconstruct-cli-'))
  const wrapped = join(dir, 'completions.json')
  const bare = join(dir, 'records.json')
  writeFileSync(wrapped, JSON.stringify({ session_id: 'sess-1', completions: records }))
  writeFileSync(bare, JSON.stringify(records))
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  it('reads both file shapes and prints every format', () => {
    const trajectory = JSON.parse(runCli(['--records', wrapped])) as Trajectory
    expect(trajectory.traces).toHaveLength(1)
    expect(JSON.parse(runCli(['--records', bare, '--builder', 'per_request'])).traces).toHaveLength(2)
    const lines = (format: string) => runCli(['--records', bare, '--format', format]).trim().split('\n')
    expect(JSON.parse(lines('slime')[0] ?? '{}')).toMatchObject({ response_length: 8 })
    expect(JSON.parse(lines('nemo-gym')[0] ?? '{}').response.output).toHaveLength(2)
    expect(JSON.parse(lines('sft')[0] ?? '{}').messages).toHaveLength(4)
    expect(JSON.parse(lines('sft-tokens')[0] ?? '{}').input_ids).toHaveLength(11)
    // One spelling with the edge (`session_result`), the old one accepted; a bare dump gets the documented task id.
    const result = JSON.parse(runCli(['--records', bare, '--format', 'session_result']))
    expect(result).toMatchObject({ status: 'COMPLETED', task_id: 'task-1' })
    expect(runCli(['--records', bare, '--format', 'session-result'])).toBe(runCli(['--records', bare, '--format', 'session_result']))
    expect(JSON.parse(runCli(['--records', bare, '--format', 'session_result', '--session', '{"task_id":"t9"}'])).task_id).toBe('t9')
    const noTask = records.map((record) => ({ ...record, metadata: {} }))
    const noTaskFile = join(dir, 'no-task.json')
    writeFileSync(noTaskFile, JSON.stringify(noTask))
    expect(JSON.parse(runCli(['--records', noTaskFile, '--format', 'session_result'])).task_id).toBe('unknown-task')
    const strict = JSON.parse(runCli(['--records', bare, '--config', '{"strict":true}', '--eval', '{"outcome_reward":0.5}']))
    expect(strict.traces[0].reward).toBe(0.5)
  })

  it('rejects bad input with a one-line message naming the option and field', () => {
    expect(() => runCli([])).toThrow(/^error: --records is required\n\nusage: npx node scripts\/reconstruct\.ts \[options\]/)
    expect(() => runCli(['--record', bare])).toThrow(/^error: Unknown option '--record'/)
    expect(() => runCli(['--records', bare, '--format', 'csv'])).toThrow(/^--format: expected one of trajectory, session_result, /)
    expect(() => runCli(['--records', bare, '--config', '{nope'])).toThrow(/--config is not valid JSON/)
    expect(() => runCli(['--records', bare, '--config', '{"bogus":1}'])).toThrow(/^config\.bogus: unknown prefix_merging option/)
    expect(() => runCli(['--records', bare, '--builder', 'magic'])).toThrow(/^--builder: /)
    expect(() => runCli(['--records', bare, '--eval', '{"outcome_reward":"high"}'])).toThrow(/^--eval outcome_reward: /)
    // Slime's indices are integers: a typo is an error naming the option, never a `group_index: null` in the export.
    for (const value of ['abc', '1.5', '0x1', '']) {
      expect(() => runCli(['--records', bare, '--format', 'slime', '--group-index', value]), value).toThrow(
        `--group-index must be a non-negative integer, got ${JSON.stringify(value)}`,
      )
    }
    expect(() => runCli(['--records', bare, '--format', 'slime', '--trajectory-index', 'x'])).toThrow(/^--trajectory-index must be/)
    expect(JSON.parse(runCli(['--records', bare, '--format', 'slime', '--group-index', '3']).split('\n')[0] ?? '{}').group_index).toBe(3)
    expect(() => runCli(['--records', join(dir, 'missing.json')])).toThrow(/^--records: cannot read .*missing\.json \(ENOENT/)
    const broken = join(dir, 'broken.json')
    writeFileSync(broken, JSON.stringify([{ ...records[0], seq: 'first' }]))
    expect(() => runCli(['--records', broken])).toThrow(/^--records \[0\]\.seq: Invalid input: expected number, received string$/)
    // One page of a longer session (`next_after_seq` set) would silently lose turns: refused, saying how to get the rest.
    const page = join(dir, 'page.json')
    writeFileSync(page, JSON.stringify({ session_id: 'sess-1', completions: records, next_after_seq: records.at(-1)!.seq }))
    expect(() => runCli(['--records', page])).toThrow(
      /^--records: this is one page of GET \/v1\/sessions\/:id\/completions \(next_after_seq \d+\): fetch the next pages with \?after_seq=/,
    )
    writeFileSync(page, JSON.stringify({ session_id: 'sess-1', completions: records, next_after_seq: null }))
    expect(JSON.parse(runCli(['--records', page])).traces).toHaveLength(1)
  })

  it('prints to stdout or --out, help to stdout, a bad option to stderr with exit 2', () => {
    const run = (args: string[]) => {
      const io = { out: '', err: '' }
      const code = main(args, { stdout: (text) => (io.out += text), stderr: (text) => (io.err += text) })
      return { code, ...io }
    }
    const ok = run(['--records', wrapped, '--format', 'sft'])
    expect(ok).toMatchObject({ code: 0, err: '' })
    expect(ok.out.trim().split('\n')).toHaveLength(1)
    const file = join(dir, 'out.jsonl')
    expect(run(['--records', wrapped, '--format', 'sft', '--out', file])).toEqual({ code: 0, out: '', err: '' })
    expect(readFileSync(file, 'utf8')).toBe(ok.out)
    rmSync(file)
    expect(run(['--records', wrapped, '--format', 'sft', `--out=${file}`])).toEqual({ code: 0, out: '', err: '' })
    expect(readFileSync(file, 'utf8')).toBe(ok.out)
    const help = run(['--help'])
    expect(help.code).toBe(0)
    expect(help.out).toMatch(/^usage: /)
    const unknown = run(['--records', wrapped, '--bogus'])
    expect(unknown).toMatchObject({ code: 2, out: '' })
    expect(unknown.err).toMatch(/^error: Unknown option '--bogus'\n\nusage: /)
    const bad = run(['--records', wrapped, '--config', '{"strict":"yes"}'])
    expect(bad.code).toBe(2)
    expect(bad.out).toBe('')
    expect(bad.err.trim().split('\n')).toEqual([expect.stringMatching(/^--config config\.strict: .*boolean/)])
  })

  // One node process (type-stripping the reconstruct module graph): its budget is a process start on a loaded
  // 2-core machine, not vitest's 5 s default for in-process logic; every branch of main is checked in-process above.
  it('runs as a script (one process: the entry point is wired to main)', { timeout: 30_000 }, () => {
    const out = execFileSync(process.execPath, ['scripts/reconstruct.ts', '--records', wrapped, '--format', 'sft'], { encoding: 'utf8' })
    expect(out).toBe(runCli(['--records', wrapped, '--format', 'sft']))
  })
})
