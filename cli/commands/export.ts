/**
 * @module
 * `rollgate export <session>`: a trajectory or trainer export (`--format trajectory|session_result|nemo-gym|sft|sft-tokens`,
 * `--builder`), to a file (`--out`) or stdout. Several sessions: `--task <id>` exports every session of a task as one
 * JSONL stream (JSON formats become one line per session).
 */
import { writeFileSync } from 'node:fs'
import { type Command, Option } from 'commander'
import { action, type CommonOptions, edgeClient, UsageError, withEdgeOptions } from '../lib/common-options.ts'

export const EXPORT_FORMATS = ['trajectory', 'session_result', 'nemo-gym', 'sft', 'sft-tokens'] as const

interface ExportOptions extends CommonOptions {
  format: string
  builder: string
  config?: string
  out?: string
  task?: string
}

/** One JSONL text from a JSON document (one line) or an NDJSON body (as is). */
function asJsonl(text: string, format: string): string {
  if (format === 'trajectory' || format === 'session_result') return `${JSON.stringify(JSON.parse(text))}\n`
  return text.endsWith('\n') || text === '' ? text : `${text}\n`
}

export function register(program: Command): void {
  withEdgeOptions(
    program
      .command('export')
      .description('export trajectories for training')
      .argument('[session]', 'session id')
      .option('--task <id>', 'every session of a task (JSONL)')
      .addOption(new Option('--format <format>', 'export format').choices([...EXPORT_FORMATS]).default('trajectory'))
      .addOption(new Option('--builder <name>', 'trajectory builder').choices(['prefix_merging', 'per_request']).default('prefix_merging'))
      .option('--config <json>', 'builder config (JSON object)')
      .option('-o, --out <file>', 'write to a file instead of stdout'),
  ).action(
    action(async (sessionId: string | undefined, options: ExportOptions) => {
      const client = edgeClient(options)
      let config: Record<string, unknown> | undefined
      if (options.config) {
        try {
          config = JSON.parse(options.config) as Record<string, unknown>
        } catch {
          throw new UsageError('--config must be a JSON object')
        }
      }
      const request = { builder: options.builder, format: options.format, ...(config ? { config } : {}) }
      let text: string
      if (options.task) {
        const status = await client.taskStatus(options.task, false)
        const parts: string[] = []
        for (const session of status.sessions) parts.push(asJsonl(await client.exportText(session.session_id, request), options.format))
        text = parts.join('')
      } else if (sessionId) {
        text = await client.exportText(sessionId, request)
      } else {
        throw new UsageError('give a session id or --task <id>')
      }
      if (options.out) {
        writeFileSync(options.out, text)
        process.stderr.write(`wrote ${text.length} characters to ${options.out}\n`)
      } else {
        process.stdout.write(text.endsWith('\n') ? text : `${text}\n`)
      }
      return undefined
    }),
  )
}
