/**
 * @module
 * `rollgate export <session>`: a trajectory or trainer export (`--format trajectory|session_result|nemo-gym|sft|sft-tokens`,
 * `--builder`), to a file (`--out`) or stdout. Several sessions: `--task <id>` exports every session of a task as one
 * JSONL stream (JSON formats become one line per session). Written as the edge sends it (bounded memory at any size).
 */
import { once } from 'node:events'
import { createWriteStream } from 'node:fs'
import type { Writable } from 'node:stream'
import { finished } from 'node:stream/promises'
import { type Command, Option } from 'commander'
import { action, type CommonOptions, edgeClient, UsageError, withEdgeOptions } from '../lib/common-options.ts'
import { type EdgeClient, EdgeError } from '../lib/edge-client.ts'

export const EXPORT_FORMATS = ['trajectory', 'session_result', 'nemo-gym', 'sft', 'sft-tokens'] as const

interface ExportOptions extends CommonOptions {
  format: string
  builder: string
  config?: string
  out?: string
  task?: string
}

/**
 * Write each session's export to `out` as it arrives (a 1,000-turn session's export is hundreds of MB: never
 * one string), each ending in a newline: a JSON format is one line already (the edge writes compact JSON), so
 * several sessions make one JSONL stream. Returns the bytes written.
 */
async function writeExports(out: Writable, bodies: AsyncIterable<AsyncIterable<Uint8Array>>): Promise<number> {
  let bytes = 0
  const write = async (chunk: Uint8Array) => {
    bytes += chunk.length
    if (!out.write(chunk)) await once(out, 'drain')
  }
  for await (const body of bodies) {
    let last = -1
    for await (const chunk of body) {
      await write(chunk)
      last = chunk[chunk.length - 1] ?? last
    }
    if (last !== -1 && last !== 0x0a) await write(NEWLINE)
  }
  return bytes
}

const NEWLINE = new Uint8Array([0x0a])

/**
 * Said on stderr when the export is of a rollout session: the edge rebuilds it from the capture log alone, so its
 * traces carry no reward (`null`) although the session was evaluated; the rewarded `SessionResult`s are the task's.
 * Before, a trainer reading `rollgate export --task` got `reward: null` everywhere with no word of why.
 */
export function rewardsNote(taskId: string): string {
  return (
    `note: rebuilt from the capture log, without the evaluation: trace rewards are null here. ` +
    `The evaluated SessionResults (rewards, training filter) are task ${taskId}'s results: GET /rollout/task/${encodeURIComponent(taskId)}`
  )
}

/** The task of a rollout session, or null for a bare capture session (`/rollout/session/:id` knows only rollout ones). */
async function rolloutTaskOf(client: EdgeClient, sessionId: string): Promise<string | null> {
  try {
    const lifecycle = await client.json<{ task_id?: string }>('GET', `/rollout/session/${encodeURIComponent(sessionId)}`)
    return typeof lifecycle.task_id === 'string' ? lifecycle.task_id : null
  } catch (error) {
    // 404: a bare session. An answer that is not the lifecycle's JSON says nothing either way: no note.
    if ((error instanceof EdgeError && error.status === 404) || error instanceof SyntaxError) return null
    throw error
  }
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
      let sessions: string[]
      if (options.task) sessions = (await client.taskStatus(options.task, false)).sessions.map((session) => session.session_id)
      else if (sessionId) sessions = [sessionId]
      else throw new UsageError('give a session id or --task <id>')
      const rolloutTask = options.task ?? (sessionId ? await rolloutTaskOf(client, sessionId) : null)
      if (rolloutTask !== null) process.stderr.write(`${rewardsNote(rolloutTask)}\n`)
      const bodies = (async function* () {
        for (const id of sessions) yield client.exportStream(id, request)
      })()
      if (options.out) {
        const file = createWriteStream(options.out)
        await once(file, 'open')
        const bytes = await writeExports(file, bodies)
        file.end()
        await finished(file)
        process.stderr.write(`wrote ${bytes} bytes to ${options.out}\n`)
      } else {
        await writeExports(process.stdout, bodies)
      }
      return undefined
    }),
  )
}
