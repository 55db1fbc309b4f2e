/**
 * @module
 * Offline trajectory reconstruction CLI.
 *
 *   npx node scripts/reconstruct.ts --records records.json [--builder prefix_merging|per_request]
 *     [--format trajectory|session-result|slime|nemo-gym|sft|sft-tokens] [--config '{...}']
 *     [--eval '{"outcome_reward":1}'] [--session '{"session_id":…,"task_id":…,"metadata":{…}}']
 *     [--group-index 0] [--trajectory-index 0] [--out file] [--pretty]
 *
 * `records.json` is either an array of completion records or `{ "completions": [...] }` as
 * `GET /v1/sessions/:id/completions` returns it (`-` reads stdin); the records may be Rollgate's or
 * in Polar's `CompletionRecord` shape (`?format=polar`, or a Polar gateway's records). `trajectory` and
 * `session-result` print one JSON document; the other formats print JSON Lines.
 */
import { readFileSync, writeFileSync } from 'node:fs'
import { parseArgs } from 'node:util'
import { z } from 'zod'
import { completionRecordSchema } from '../src/contract/completion-record.ts'
import { builderNameSchema, evalResultSchema } from '../src/contract/trajectory.ts'
import {
  applyEvalResult,
  fromPolarCompletionRecords,
  isPolarRecord,
  reconstructTrajectory,
  toJsonl,
  toNemoGymRows,
  toSessionResult,
  toSftRows,
  toSftTokenRows,
  toSlimeSamples,
} from '../src/reconstruct/index.ts'

const FORMATS = ['trajectory', 'session-result', 'slime', 'nemo-gym', 'sft', 'sft-tokens'] as const
const formatSchema = z.enum(FORMATS)

const recordsFileSchema = z.union([
  z.array(completionRecordSchema),
  z.looseObject({ completions: z.array(completionRecordSchema) }).transform((value) => value.completions),
])

/** Rollgate records, or Polar-shaped ones (detected by their `response` object) converted. */
export function parseRecordsFile(json: unknown) {
  const list = Array.isArray(json) ? json : (json as { completions?: unknown } | null)?.completions
  if (Array.isArray(list) && list.length > 0 && isPolarRecord(list[0])) {
    const sessionId = (json as { session_id?: unknown }).session_id
    return fromPolarCompletionRecords(list, typeof sessionId === 'string' ? sessionId : undefined)
  }
  return recordsFileSchema.parse(json)
}

const sessionSchema = z.object({
  session_id: z.string().optional(),
  task_id: z.string().optional(),
  metadata: z.record(z.string(), z.unknown()).optional(),
})

const USAGE =
  'usage: npx node scripts/reconstruct.ts --records records.json ' +
  '[--builder prefix_merging|per_request] ' +
  `[--format ${FORMATS.join('|')}] [--config '{...}'] [--eval '{...}'] [--session '{...}'] ` +
  '[--group-index N] [--trajectory-index N] [--out file] [--pretty]'

function parseJsonOption(name: string, value: string | undefined): unknown {
  if (value === undefined) return undefined
  try {
    return JSON.parse(value)
  } catch (error) {
    throw new Error(`--${name} is not valid JSON: ${(error as Error).message}`)
  }
}

export function runCli(argv: string[]): string {
  const { values } = parseArgs({
    args: argv,
    options: {
      records: { type: 'string' },
      builder: { type: 'string', default: 'prefix_merging' },
      format: { type: 'string', default: 'trajectory' },
      config: { type: 'string' },
      eval: { type: 'string' },
      session: { type: 'string' },
      'group-index': { type: 'string', default: '0' },
      'trajectory-index': { type: 'string', default: '0' },
      out: { type: 'string' },
      pretty: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
    strict: true,
  })
  if (values.help || values.records === undefined) throw new Error(USAGE)

  const builder = builderNameSchema.parse(values.builder)
  const format = formatSchema.parse(values.format)
  const raw = readFileSync(values.records === '-' ? 0 : values.records, 'utf8')
  const records = parseRecordsFile(JSON.parse(raw))
  const config = parseJsonOption('config', values.config) as Record<string, unknown> | undefined
  const session = sessionSchema.parse(parseJsonOption('session', values.session) ?? {})

  let trajectory = reconstructTrajectory(records, {
    builder,
    ...(config === undefined ? {} : { config }),
    session,
  })
  const evalJson = parseJsonOption('eval', values.eval)
  if (evalJson !== undefined) trajectory = applyEvalResult(trajectory, evalResultSchema.parse(evalJson))

  const indent = values.pretty ? 2 : undefined
  const sessionId = session.session_id ?? records[0]?.session_id ?? 'unknown-session'
  const taskId = session.task_id ?? (typeof trajectory.metadata.task_id === 'string' ? trajectory.metadata.task_id : 'unknown-task')
  const sessionResult = () => toSessionResult(trajectory, { session_id: sessionId, task_id: taskId })
  switch (format) {
    case 'trajectory':
      return `${JSON.stringify(trajectory, null, indent)}\n`
    case 'session-result':
      return `${JSON.stringify(sessionResult(), null, indent)}\n`
    case 'slime':
      return toJsonl(
        toSlimeSamples(sessionResult(), {
          group_index: Number(values['group-index']),
          trajectory_index: Number(values['trajectory-index']),
        }),
      )
    case 'nemo-gym':
      return toJsonl(toNemoGymRows(trajectory))
    case 'sft':
      return toJsonl(toSftRows(trajectory))
    case 'sft-tokens':
      return toJsonl(toSftTokenRows(trajectory))
  }
}

if (import.meta.main) {
  try {
    const args = process.argv.slice(2)
    const output = runCli(args)
    const outIndex = args.indexOf('--out')
    const out = outIndex >= 0 ? args[outIndex + 1] : undefined
    if (out !== undefined) writeFileSync(out, output)
    else process.stdout.write(output)
  } catch (error) {
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`)
    process.exitCode = 1
  }
}
