import { describe, expect, it } from 'vitest'
import { taskRequestSchema } from '../../../src/contract/rollout.ts'
import { withoutCredentials } from '../../../src/contract/upstream-url.ts'

describe('upstream URLs never keep credentials', () => {
  it('removes user info and leaves other URLs byte for byte', () => {
    expect(withoutCredentials('http://user:pass@10.0.0.5:8000/v1')).toBe('http://10.0.0.5:8000/v1')
    expect(withoutCredentials('https://token@engine.example/v1')).toBe('https://engine.example/v1')
    expect(withoutCredentials('http://10.0.0.5:8000/v1')).toBe('http://10.0.0.5:8000/v1')
  })

  it('in a task request upstream', () => {
    const task = taskRequestSchema.parse({
      task_id: 't',
      instruction: 'x',
      agent: { harness: 'qwen_code' },
      upstream: { route: 'direct', url: 'http://trainer:hunter2@127.0.0.1:8000/v1' },
    })
    expect(task.upstream?.url).toBe('http://127.0.0.1:8000/v1')
  })
})
