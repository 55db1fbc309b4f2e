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

export const EXPORT_FORMATS = ['trajectory', 'session_result', 'nemo-gym', 'sft', 'sft-tokens'] as const

interface ExportOptions extends CommonOptions {
  format: string
  builder?: string
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
 * Said on stderr for a session whose export has no evaluation although it is a rollout session (the edge's
 * `x-rollgate-evaluation`): not evaluated yet (`pending`), or asked with another builder than its task's
 * (`other_builder`: the rewards belong to the task builder's traces). An evaluated session's export carries
 * its rewards, a bare capture session's has none to carry: nothing is said for either. Null otherwise.
 */
export function rewardsNote(sessionId: string, headers: Headers): string | null {
  const evaluation = headers.get('x-rollgate-evaluation')
  const status = headers.get('x-rollgate-rollout-status') ?? 'unknown'
  if (evaluation === 'pending') return `note: session ${sessionId} is ${status}, not evaluated yet: its traces have reward null`
  if (evaluation === 'other_builder') {
    const builder = headers.get('x-rollgate-builder') ?? "the task's"
    return `note: session ${sessionId} was evaluated with builder ${builder} and another config or builder was asked: its traces have reward null (leave out --builder/--config for the evaluated export)`
  }
  return null
}

export function register(program: Command): void {
  withEdgeOptions(
    program
      .command('export')
      .description('export trajectories for training')
      .argument('[session]', 'session id')
      .option('--task <id>', 'every session of a task (JSONL)')
      .addOption(new Option('--format <format>', 'export format').choices([...EXPORT_FORMATS]).default('trajectory'))
      .addOption(
        new Option('--builder <name>', "trajectory builder (default: a rollout session's task builder, else prefix_merging)").choices([
          'prefix_merging',
          'per_request',
        ]),
      )
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
      const request = { ...(options.builder ? { builder: options.builder } : {}), format: options.format, ...(config ? { config } : {}) }
      let sessions: string[]
      if (options.task) sessions = (await client.taskStatus(options.task, false)).sessions.map((session) => session.session_id)
      else if (sessionId) sessions = [sessionId]
      else throw new UsageError('give a session id or --task <id>')
      const bodies = (async function* () {
        for (const id of sessions)
          yield client.exportStream(id, request, (headers) => {
            const note = rewardsNote(id, headers)
            if (note !== null) process.stderr.write(`${note}\n`)
          })
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
