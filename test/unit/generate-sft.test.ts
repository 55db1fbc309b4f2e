/**
 * `rollgate generate-sft`'s pure parts: the TaskRequest it submits (from a task fixture) and how an
 * attempt's reward is read from its SessionResult.
 */
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { attemptReward, sftTask } from '../../cli/commands/generate-sft.ts'
import { taskRequestSchema } from '../../src/contract/rollout.ts'
import { sessionResultSchema } from '../../src/contract/trajectory.ts'

const TASK = join(import.meta.dirname, '../../tasks/fix-stats/task.json')

describe('generate-sft', () => {
  it('submits the fixture with N samples, a fresh id, the chosen upstream and absolute upload sources', () => {
    const task = taskRequestSchema.parse(sftTask(TASK, { attempts: 3, upstream: 'http://127.0.0.1:8000', kind: 'vllm', harness: 'pi' }))
    expect(task.task_id).toMatch(/^fix-stats-sft-[a-z0-9]+$/)
    expect(task.num_samples).toBe(3)
    expect(task.upstream).toEqual({ route: 'direct', url: 'http://127.0.0.1:8000', kind: 'vllm' })
    expect(task.agent.harness).toBe('pi')
    expect(task.evaluator?.strategy).toBe('test_on_output')
    expect(task.callback_url).toBeNull()
    const upload = task.runtime?.prepare.find((action) => action.type === 'upload_dir')
    expect(upload?.source).toBe(join(import.meta.dirname, '../../tasks/fix-stats/repo'))
    const hosted = taskRequestSchema.parse(
      sftTask(TASK, { attempts: 1, upstream: 'https://api.example.com/v1', kind: 'openai', servedModel: 'gpt-x' }),
    )
    expect(hosted.upstream).toEqual({ route: 'direct', url: 'https://api.example.com/v1', kind: 'openai', served_model: 'gpt-x' })
    expect(hosted.agent.harness).toBe('qwen_code')
  })

  it("reads the evaluator's outcome reward, else the best trace reward", () => {
    const result = (metadata: Record<string, unknown>, rewards: Array<number | null>) =>
      sessionResultSchema.parse({
        session_id: 's',
        task_id: 't',
        status: 'COMPLETED',
        trajectory: {
          status: 'COMPLETED',
          metadata,
          traces: rewards.map((reward) => ({ prompt_ids: [1], response_ids: [2], loss_mask: [1], reward })),
        },
      })
    expect(attemptReward(result({ evaluation: { strategy: 'test_on_output', outcome_reward: 0 } }, [1]))).toBe(0)
    expect(attemptReward(result({}, [0.5, 1, null]))).toBe(1)
    expect(attemptReward(result({}, [null]))).toBeNull()
  })
})
