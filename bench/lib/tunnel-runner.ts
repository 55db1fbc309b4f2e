/**
 * @module
 * A scripted runner (`test/support/runner-client.ts`) in a process of its own, for `bench:tunnel`: a real
 * runner is its own process, so its tunnel work must not share the load generator's event loop (nor its
 * CPU accounting). `startTunnelRunner` forks this file and drives it over IPC: `take` walks the next
 * assignments of a task to RUNNING and returns them; `stats` and `shutdown` as named; `profileStart` /
 * `profileStop` take a V8 CPU profile of the runner process (`profile:tunnel`). The child exits
 * with its parent (IPC disconnect) whatever happens.
 */
import { type ChildProcess, fork } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { Session } from 'node:inspector/promises'
import { fileURLToPath } from 'node:url'
import type { SessionAssignment } from '../../src/contract/runner-protocol.ts'
import { RunnerClient, type RunnerClientOptions } from '../../test/support/runner-client.ts'

type Command =
  | { id: number; cmd: 'take'; taskId: string; count: number }
  | { id: number; cmd: 'stats' }
  | { id: number; cmd: 'shutdown' }
  | { id: number; cmd: 'profile-start' }
  | { id: number; cmd: 'profile-stop'; path: string }

type WithoutId<T> = T extends unknown ? Omit<T, 'id'> : never

export interface TunnelRunner {
  pid: number
  take(taskId: string, count: number): Promise<SessionAssignment[]>
  stats(): Promise<RunnerClient['stats']>
  /** Start V8's CPU profiler in the runner process (100 µs sampling). */
  profileStart(): Promise<void>
  /** Stop it and write the `.cpuprofile` to `path`. */
  profileStop(path: string): Promise<void>
  shutdown(): Promise<void>
}

/**
 * Fork a runner process, connected and registered once this resolves. `script`: this file from another
 * checkout (`bench:tunnel --runner-b`), so two runner builds answer side by side against the same edge.
 */
export async function startTunnelRunner(options: RunnerClientOptions, script = fileURLToPath(import.meta.url)): Promise<TunnelRunner> {
  const child: ChildProcess = fork(script, [JSON.stringify(options)], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    // TUNNEL_RUNNER_PROFILE=<dir>: a V8 CPU profile of each runner process, written when it exits;
    // TUNNEL_RUNNER_NODE_ARGS: more Node flags for the runner processes (e.g. `--trace-gc`).
    execArgv: [
      ...(process.env.TUNNEL_RUNNER_PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${process.env.TUNNEL_RUNNER_PROFILE}`] : []),
      ...(process.env.TUNNEL_RUNNER_NODE_ARGS?.split(' ').filter(Boolean) ?? []),
    ],
  })
  process.once('exit', () => child.kill('SIGKILL'))
  let next = 1
  const waiters = new Map<number, { resolve(value: unknown): void; reject(error: Error): void }>()
  child.on('message', (message: { id: number; ok: boolean; value?: unknown; error?: string }) => {
    const waiter = waiters.get(message.id)
    waiters.delete(message.id)
    if (message.ok) waiter?.resolve(message.value)
    else waiter?.reject(new Error(message.error))
  })
  child.once('exit', (code) => {
    for (const waiter of waiters.values()) waiter.reject(new Error(`tunnel runner exited (${code})`))
    waiters.clear()
  })
  const call = <T>(command: WithoutId<Command>): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      const id = next++
      waiters.set(id, { resolve: resolve as (value: unknown) => void, reject })
      child.send({ ...command, id })
    })
  await call({ cmd: 'stats' }) // answers once registered
  return {
    pid: child.pid as number,
    take: (taskId, count) => call({ cmd: 'take', taskId, count }),
    stats: () => call({ cmd: 'stats' }),
    profileStart: () => call({ cmd: 'profile-start' }),
    profileStop: (path) => call({ cmd: 'profile-stop', path }),
    shutdown: async () => {
      await call({ cmd: 'shutdown' }).catch(() => {})
      if (child.exitCode === null) await new Promise((resolve) => child.once('exit', resolve))
    },
  }
}

// --- the child ---
if (process.argv[1] === fileURLToPath(import.meta.url) && process.send) {
  const runner = new RunnerClient(JSON.parse(process.argv[2] as string) as RunnerClientOptions)
  const started = runner.start()
  const profiler = new Session()
  profiler.connect()
  const reply = (id: number, work: () => Promise<unknown>) =>
    work().then(
      (value) => process.send?.({ id, ok: true, value }),
      (error: Error) => process.send?.({ id, ok: false, error: error.message }),
    )
  process.on('message', (command: Command) => {
    if (command.cmd === 'take') {
      void reply(command.id, async () => {
        await started
        const sessions: SessionAssignment[] = []
        for (let i = 0; i < command.count; i++) sessions.push(await runner.take(command.taskId))
        return sessions
      })
    } else if (command.cmd === 'stats') {
      void reply(command.id, async () => {
        await started
        return runner.stats
      })
    } else if (command.cmd === 'profile-start') {
      void reply(command.id, async () => {
        await profiler.post('Profiler.enable')
        await profiler.post('Profiler.setSamplingInterval', { interval: 100 })
        await profiler.post('Profiler.start')
      })
    } else if (command.cmd === 'profile-stop') {
      void reply(command.id, async () => {
        const { profile } = await profiler.post('Profiler.stop')
        writeFileSync(command.path, JSON.stringify(profile))
      })
    } else {
      void reply(command.id, async () => {
        await runner.shutdown()
      }).then(() => process.exit(0))
    }
  })
  process.on('disconnect', () => {
    void runner.shutdown().finally(() => process.exit(0))
  })
}
