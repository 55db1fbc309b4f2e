/**
 * @module
 * `rollgate status [task]`: the rollout overview (tasks, pipeline, runners with their stage pools, the
 * generation gate), or one task's status with its sessions.
 */
import type { Command } from 'commander'
import { action, type CommonOptions, edgeClient, output, withEdgeOptions } from '../lib/common-options.ts'
import { liveSessions, stageCounts } from '../lib/task-watch.ts'

export function register(program: Command): void {
  withEdgeOptions(program.command('status').description('rollout overview, or one task').argument('[task]', 'task id')).action(
    action(async (taskId: string | undefined, options: CommonOptions) => {
      const client = edgeClient(options)
      if (taskId) {
        const summary = await client.taskStatus(taskId, false)
        const status = { ...summary, sessions: await liveSessions(client, summary) }
        output(options, status, () => {
          const counts = stageCounts(status)
          return [
            `task ${status.task_id}: ${status.status}, ${status.completed_sessions}/${status.total_sessions} resolved, ${status.usable_sessions} usable`,
            `  ${Object.entries(counts)
              .map(([stage, n]) => `${stage} ${n}`)
              .join('  ')}`,
            `  callback: ${status.callback ? `${status.callback.state} (${status.callback.attempts} attempts)` : 'none'}`,
          ].join('\n')
        })
        return undefined
      }
      const [overview, gate] = await Promise.all([client.rolloutStatus(), client.gateStatus()])
      output(options, { ...overview, inference: gate }, () => {
        const lines = [
          `tasks: ${
            Object.entries(overview.tasks)
              .map(([id, state]) => `${id}=${state}`)
              .join(' ') || 'none'
          }`,
          `pipeline: ${overview.pipeline.pending_sessions} pending, ${overview.pipeline.assigned_sessions} assigned`,
          `inference: ${gate.paused ? 'PAUSED' : 'open'}, ${gate.inflight} in flight, policy ${gate.policy_version ?? '—'}`,
          `runners: ${overview.nodes.nodes.length}`,
        ]
        for (const node of overview.nodes.nodes) {
          lines.push(
            `  ${node.node_id}  ${node.healthy ? 'healthy' : 'UNHEALTHY'}${node.draining ? ' draining' : ''}  ` +
              `init ${node.metrics.init_inflight}/${node.max_init_workers} (+${node.metrics.init_queue_depth} queued) ` +
              `ready ${node.metrics.ready_depth}/${node.ready_buffer} run ${node.metrics.run_inflight}/${node.max_run_workers} ` +
              `post ${node.metrics.postrun_inflight}/${node.max_postrun_workers}  sessions ${node.sessions}`,
          )
        }
        return lines.join('\n')
      })
      return undefined
    }),
  )
}
