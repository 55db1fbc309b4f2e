/**
 * @module
 * `freePort` draws below the kernel's ephemeral range (outgoing connections' source ports cannot take what it
 * hands out), and stopping a process group waits until no member is alive (an edge restarted on its port finds
 * it free).
 */
import { spawn } from 'node:child_process'
import { createServer } from 'node:net'
import { describe, expect, it } from 'vitest'
import { freePort, groupGone, groupPids, portPool } from '../../scripts/lib/processes.ts'

describe('freePort', () => {
  it('draws below the ephemeral range when there is room, else lets the kernel choose', () => {
    expect(portPool('32768\t60999\n')).toEqual({ low: 10_000, high: 32_767 })
    expect(portPool('49152 65535')).toEqual({ low: 10_000, high: 49_151 })
    expect(portPool('1024 65535')).toBeNull()
    expect(portPool('')).toBeNull()
  })

  it('hands out a port of the pool that can be bound', async () => {
    const pool = { low: 20_000, high: 20_999 }
    for (let i = 0; i < 20; i++) {
      const port = await freePort(pool)
      expect(port).toBeGreaterThanOrEqual(pool.low)
      expect(port).toBeLessThanOrEqual(pool.high)
    }
  })

  it('skips a port in use', async () => {
    const taken = createServer()
    const port = await freePort({ low: 21_000, high: 21_999 })
    await new Promise<void>((resolve) => taken.listen(port, '127.0.0.1', resolve))
    try {
      // A pool of that port and one other: the taken one is never handed out.
      for (let i = 0; i < 10; i++) {
        const next = await freePort({ low: port, high: port + 1 })
        expect(next).toBe(port + 1)
      }
    } finally {
      await new Promise((resolve) => taken.close(resolve))
    }
  })
})

describe('groupGone', () => {
  it('waits for a member that outlives the group leader', async () => {
    // The leader starts a child that ignores SIGTERM for a while, then exits at once (as wrangler leaves workerd).
    const leader = spawn('sh', ['-c', 'sh -c "trap \'\' TERM; sleep 0.3" & exit 0'], { detached: true, stdio: 'ignore' })
    const group = leader.pid as number
    await new Promise((resolve) => leader.once('exit', resolve))
    expect(groupPids(group, { live: true }).length).toBeGreaterThan(0)
    await groupGone(group)
    expect(groupPids(group, { live: true })).toEqual([])
  })
})
