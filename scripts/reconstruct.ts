/**
 * @module
 * Offline trajectory reconstruction CLI.
 *
 *   npx node scripts/reconstruct.ts --records records.json [--builder prefix_merging|per_request]
 *     [--format trajectory|session_result|slime|nemo-gym|sft|sft-tokens] [--config '{...}']
 *     [--eval '{"outcome_reward":1}'] [--session '{"session_id":…,"task_id":…,"metadata":{…}}']
 *     [--group-index 0] [--trajectory-index 0] [--out file] [--pretty]
 *
 * `records.json` is either an array of completion records or `{ "completions": [...] }` as
 * `GET /v1/sessions/:id/completions` returns it (`-` reads stdin; a page with `next_after_seq` set is
 * refused: the rest of the session is missing); the records may be Rollgate's or
 * in Polar's `CompletionRecord` shape (`?format=polar`, or a Polar gateway's records). `trajectory` and
 * `session_result` print one JSON document; the other formats print JSON Lines. Format names are the edge's
 * (`?format=` of `GET …/trajectory`; `slime` is offline only); `session-result` is accepted too. `--help` prints the options and exits 0; a
 * bad option or input exits 2 naming the option (an unknown or missing one also prints the options), as
 * `rollgate`'s usage and input errors do.
 */
import { readFileSync, writeFileSync } from 'node:fs'
import { z } from 'zod'
import { completionRecordSchema } from '../src/contract/completion-record.ts'
import { partialPageMessage } from '../src/contract/completions-page.ts'
import { RequestValidationError } from '../src/normalize/adapter.ts'
import { parseOrThrow } from '../src/normalize/zod-issues.ts'
import { parseCliArgs, usageText } from './lib/cli-args.ts'
import { builderNameSchema, evalResultSchema } from '../src/contract/trajectory.ts'
import {
  applyEvalResult,
  BuilderConfigError,
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

const FORMATS = ['trajectory', 'session_result', 'slime', 'nemo-gym', 'sft', 'sft-tokens'] as const
type Format = (typeof FORMATS)[number]
/** Other spellings of the same formats (the edge and this script once spelled some differently). */
const FORMAT_ALIASES: Record<string, Format> = { 'session-result': 'session_result', nemo_gym: 'nemo-gym', sft_tokens: 'sft-tokens' }

function parseFormat(value: string): Format {
  const format = FORMAT_ALIASES[value] ?? value
  if (!(FORMATS as readonly string[]).includes(format))
    throw new Error(`--format: expected one of ${FORMATS.join(', ')}, got ${JSON.stringify(value)}`)
  return format as Format
}

/** Parse or throw one line naming the option and the most specific bad field (`--eval outcome_reward: …`). */
function parseWith<T>(what: string, schema: z.ZodType<T>, value: unknown): T {
  try {
    return parseOrThrow(schema, value)
  } catch (error) {
    if (error instanceof RequestValidationError) throw new Error(`${what}${error.param ? ' ' : ': '}${error.message}`)
    throw error
  }
}

const recordsFileSchema = z.union([
  z.array(completionRecordSchema),
  z.looseObject({ completions: z.array(completionRecordSchema) }).transform((value) => value.completions),
])

/** Rollgate records, or Polar-shaped ones (detected by their `response` object) converted. */
export function parseRecordsFile(json: unknown) {
  const partial = partialPageMessage(json)
  if (partial) throw new Error(`--records: ${partial}`)
  const list = Array.isArray(json) ? json : (json as { completions?: unknown } | null)?.completions
  if (Array.isArray(list) && list.length > 0 && isPolarRecord(list[0])) {
    const sessionId = (json as { session_id?: unknown }).session_id
    return fromPolarCompletionRecords(list, typeof sessionId === 'string' ? sessionId : undefined)
  }
  return parseWith('--records', recordsFileSchema, json)
}

const sessionSchema = z.object({
  session_id: z.string().optional(),
  task_id: z.string().optional(),
  metadata: z.record(z.string(), z.unknown()).optional(),
})

const OPTIONS = {
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
} as const
const COMMAND = 'npx node scripts/reconstruct.ts'
const ABOUT = [
  '--records    records.json: the body of GET /v1/sessions/:id/completions (all pages joined) or its completions array; - reads stdin',
  '--builder    prefix_merging | per_request',
  `--format     ${FORMATS.join(' | ')}`,
  '--config     builder options as JSON (\'{"strict":true}\')',
  '--eval       an evaluation result as JSON (\'{"outcome_reward":1}\')',
  '--session    {"session_id", "task_id", "metadata"} as JSON',
  '--group-index, --trajectory-index   slime sample indices',
  '--out        write to a file instead of stdout; --pretty indents JSON',
].join('\n')

export const USAGE = usageText(OPTIONS, COMMAND, ABOUT)

function parseJsonOption(name: string, value: string | undefined): unknown {
  if (value === undefined) return undefined
  try {
    return JSON.parse(value)
  } catch (error) {
    throw new Error(`--${name} is not valid JSON: ${(error as Error).message}`)
  }
}

/** A non-negative integer option written as one (`0`, `12`): never `abc` (NaN), `1.5` or `0x1`. */
function indexOption(name: string, value: string): number {
  const index = /^(0|[1-9][0-9]*)$/.test(value) ? Number(value) : Number.NaN
  if (!Number.isSafeInteger(index)) throw new Error(`--${name} must be a non-negative integer, got ${JSON.stringify(value)}`)
  return index
}

/** The records file (`-`: stdin); a file that cannot be read is an error naming the option. */
function readRecords(path: string): string {
  try {
    return readFileSync(path === '-' ? 0 : path, 'utf8')
  } catch (error) {
    throw new Error(`--records: cannot read ${path === '-' ? 'stdin' : path} (${(error as Error).message})`)
  }
}

/** Thrown for `--help`: the usage goes to stdout and the exit code is 0. */
export class HelpRequested extends Error {}

/** An unknown, malformed or missing option: the message carries the usage. */
export class UsageError extends Error {}

export function runCli(argv: string[]): string {
  const outcome = parseCliArgs({ args: argv, options: OPTIONS, strict: true }, COMMAND, ABOUT)
  if (outcome.kind === 'help') throw new HelpRequested(outcome.text)
  if (outcome.kind === 'error') throw new UsageError(outcome.text)
  const { values } = outcome.parsed
  if (values.records === undefined) throw new UsageError(`error: --records is required\n\n${USAGE}`)

  const builder = parseWith('--builder', builderNameSchema, values.builder)
  const format = parseFormat(values.format)
  const groupIndex = indexOption('group-index', values['group-index'])
  const trajectoryIndex = indexOption('trajectory-index', values['trajectory-index'])
  const raw = readRecords(values.records)
  const records = parseRecordsFile(parseJsonOption('records', raw))
  const config = parseJsonOption('config', values.config) as Record<string, unknown> | undefined
  const session = parseWith('--session', sessionSchema, parseJsonOption('session', values.session) ?? {})

  let trajectory = reconstructTrajectory(records, {
    builder,
    ...(config === undefined ? {} : { config }),
    session,
  })
  const evalJson = parseJsonOption('eval', values.eval)
  if (evalJson !== undefined) trajectory = applyEvalResult(trajectory, parseWith('--eval', evalResultSchema, evalJson))

  const indent = values.pretty ? 2 : undefined
  const sessionId = session.session_id ?? records[0]?.session_id ?? 'unknown-session'
  const sessionResult = () =>
    toSessionResult(trajectory, { session_id: sessionId, ...(session.task_id ? { task_id: session.task_id } : {}) })
  switch (format) {
    case 'trajectory':
      return `${JSON.stringify(trajectory, null, indent)}\n`
    case 'session_result':
      return `${JSON.stringify(sessionResult(), null, indent)}\n`
    case 'slime':
      return toJsonl(
        toSlimeSamples(sessionResult(), {
          group_index: groupIndex,
          trajectory_index: trajectoryIndex,
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

/** The script's process side: output to `--out` or stdout, help to stdout (0), a bad option or input to stderr (2). */
export function main(args: string[], io: { stdout(text: string): void; stderr(text: string): void }): number {
  try {
    const output = runCli(args)
    // Parsed as runCli parsed it (so `--out=file` is honoured too); the arguments are known to be valid here.
    const parsed = parseCliArgs({ args, options: OPTIONS, strict: true })
    const out = parsed.kind === 'ok' ? parsed.parsed.values.out : undefined
    if (out !== undefined) writeFileSync(out, output)
    else io.stdout(output)
    return 0
  } catch (error) {
    if (error instanceof HelpRequested) {
      io.stdout(`${error.message}\n`)
      return 0
    }
    const message =
      error instanceof BuilderConfigError ? `--config ${error.message}` : error instanceof Error ? error.message : String(error)
    io.stderr(`${message}\n`)
    return 2
  }
}

if (import.meta.main) {
  process.exitCode = main(process.argv.slice(2), {
    stdout: (text) => process.stdout.write(text),
    stderr: (text) => process.stderr.write(text),
  })
}
