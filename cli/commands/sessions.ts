/**
 * @module
 * `rollgate sessions <task>`: the sessions of a task (status, runner, usable);
 * `rollgate sessions <task> --session <id>`: one session's summary and completions (paged from the edge).
 */
import type { Command } from 'commander'
import { action, type CommonOptions, edgeClient, output, withEdgeOptions } from '../lib/common-options.ts'

interface SessionsOptions extends CommonOptions {
  session?: string
}

export function register(program: Command): void {
  withEdgeOptions(
    program
      .command('sessions')
      .description("a task's sessions, or one session's completions")
      .argument('[task]', 'task id')
      .option('--session <id>', 'show one session (summary + completions)'),
  ).action(
    action(async (taskId: string | undefined, options: SessionsOptions) => {
      const client = edgeClient(options)
      if (options.session) {
        const summary = await client.session(options.session)
        const completions: Record<string, unknown>[] = []
        for await (const record of client.completions(options.session)) completions.push(record)
        const rows = completions.map((record) => ({
          seq: record.seq,
          api: record.api,
          agent: record.agent,
          status: record.status,
          trainable: record.trainable,
          prompt_tokens: (record.prompt_token_ids as unknown[] | undefined)?.length ?? null,
          response_tokens: (record.response_token_ids as unknown[] | undefined)?.length ?? null,
          finish_reason: record.finish_reason,
        }))
        output(options, { ...summary, completions: rows }, () =>
          [
            `session ${options.session}: ${completions.length} completions`,
            ...rows.map(
              (row) =>
                `  #${row.seq} ${String(row.api).padEnd(16)} ${String(row.agent ?? '').padEnd(10)} ${String(row.status).padEnd(9)} ` +
                `in ${row.prompt_tokens} out ${row.response_tokens} ${row.finish_reason ?? ''}`,
            ),
          ].join('\n'),
        )
        return undefined
      }
      if (!taskId) {
        process.stderr.write('rollgate: give a task id, or --session <id>\n')
        return 2
      }
      const status = await client.taskStatus(taskId, false)
      output(options, status.sessions, () =>
        status.sessions
          .map(
            (session) =>
              `${session.session_id}  #${session.index}  ${session.status.padEnd(11)} ${session.usable ? 'usable' : '      '}  ${session.runner_id ?? ''}`,
          )
          .join('\n'),
      )
      return undefined
    }),
  )
}
