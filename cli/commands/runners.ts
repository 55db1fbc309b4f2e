/**
 * @module
 * `rollgate runners list | drain <id> | resume <id>`: the operator's view of the runner registry
 * (`GET /rollout/runners`) and the admin drain, a cordon that holds across the runner's reconnects and
 * restarts (`DELETE /rollout/runners/:id`) until resumed (`POST /rollout/runners/:id/resume`). An id the
 * edge has never seen is the edge's 404 (exit 3), never a silent success.
 */
import type { Command } from 'commander'
import type { RunnerEntry } from '../../src/contract/rollout.ts'
import { action, type CommonOptions, edgeClient, output, withEdgeOptions } from '../lib/common-options.ts'

/** One line per runner: id, state, health and drains, slots, sessions, credential, last heartbeat. */
export function describeRunner(runner: RunnerEntry): string {
  const flags = [
    runner.state,
    ...(runner.state === 'absent' ? [] : [runner.healthy ? 'healthy' : 'UNHEALTHY']),
    ...(runner.draining ? ['draining'] : []),
    ...(runner.cordoned ? [`cordoned since ${runner.cordoned_at}`] : []),
    ...(runner.accepting ? ['accepting'] : []),
  ]
  const parts = [runner.runner_id, flags.join(' ')]
  const { slots } = runner
  if (slots)
    parts.push(
      `init ${slots.init.inflight}/${slots.init.max} (+${slots.init.queued} queued) ready ${slots.ready.depth}/${slots.ready.max} ` +
        `run ${slots.run.inflight}/${slots.run.max} post ${slots.postrun.inflight}/${slots.postrun.max}`,
      `sessions ${runner.sessions}`,
    )
  parts.push(`credential ${runner.credential}`)
  if (runner.state === 'disconnected') parts.push(`disconnected at ${runner.connection.disconnected_at}`)
  else if (runner.connection.last_heartbeat) parts.push(`last heartbeat ${runner.connection.last_heartbeat}`)
  return parts.join('  ')
}

export function register(program: Command): void {
  const runners = program
    .command('runners')
    .description('the runner registry, and the admin drain (cordon) of a runner')
    .addHelpText(
      'after',
      "\nAn admin drain holds across the runner's reconnects and restarts until `rollgate runners resume <id>`;\nwhat the runner holds runs to its end. A runner's own drain (SIGTERM) is its own: resume does not undo it.",
    )

  withEdgeOptions(runners.command('list').description('every runner id the edge knows: state, health, drains, slots, connection')).action(
    action(async (options: CommonOptions) => {
      const list = await edgeClient(options).runners()
      output(options, list, () =>
        [`runners: ${list.runners.length}`, ...list.runners.map((runner) => `  ${describeRunner(runner)}`)].join('\n'),
      )
      return undefined
    }),
  )

  withEdgeOptions(
    runners
      .command('drain')
      .description('admin drain: the runner takes no new session, across its reconnects and restarts, until resumed')
      .argument('<id>', 'runner id'),
  ).action(
    action(async (runnerId: string, options: CommonOptions) => {
      const answer = await edgeClient(options).drainRunner(runnerId)
      output(options, answer, () => `runner ${runnerId} drained: it takes no new session until \`rollgate runners resume ${runnerId}\``)
      return undefined
    }),
  )

  withEdgeOptions(runners.command('resume').description('undo an admin drain').argument('<id>', 'runner id')).action(
    action(async (runnerId: string, options: CommonOptions) => {
      const answer = await edgeClient(options).resumeRunner(runnerId)
      output(options, answer, () =>
        answer.draining
          ? `runner ${runnerId}: admin drain lifted, but the runner is draining itself (SIGTERM): it takes no new session`
          : `runner ${runnerId} resumed: it takes new sessions`,
      )
      return undefined
    }),
  )
}
