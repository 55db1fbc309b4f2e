/**
 * @module
 * `node:util`'s `parseArgs` for the repo's scripts and benchmarks, with what a person typing the command needs:
 * `--help` / `-h` prints the options (with their defaults) and, when given, a few lines on what the command
 * does, then exits 0 before anything starts; an unknown option or a missing value prints one `error:` line and
 * the options and exits 2 — never a stack trace. A drop-in replacement: same config, same result.
 * `test/unit/script-flags.test.ts` holds every npm script to that.
 */
import { type ParseArgsConfig, parseArgs as nodeParseArgs } from 'node:util'
import { relative } from 'node:path'

type Options = NonNullable<ParseArgsConfig['options']>

/** The options as a person reads them: `--name <value>  (default: …)`, one a line, then `about` if given. */
export function usageText(options: Options, command = defaultCommand(), about?: string): string {
  const lines = Object.entries(options).map(([name, option]) => {
    const flag = `${option.short ? `-${option.short}, ` : ''}--${name}${option.type === 'string' ? ' <value>' : ''}${option.multiple ? ' …' : ''}`
    const fallback = option.default === undefined || option.default === false ? '' : `  (default: ${JSON.stringify(option.default)})`
    return `  ${flag}${fallback}`
  })
  const usage = [`usage: ${command} [options]`, ...lines, '  -h, --help'].join('\n')
  return about ? `${usage}\n\n${about}` : usage
}

function defaultCommand(): string {
  const script = process.env.npm_lifecycle_event
  if (script && !script.startsWith('npx')) return `npm run ${script} --`
  return `node ${relative(process.cwd(), process.argv[1] ?? 'script')}`
}

export type CliOutcome<T> = { kind: 'ok'; parsed: T } | { kind: 'help'; text: string } | { kind: 'error'; text: string }

/** The pure part: parsed arguments, the help text, or the error text (the exit is the caller's). */
export function parseCliArgs<T extends ParseArgsConfig>(
  config: T,
  command?: string,
  about?: string,
): CliOutcome<ReturnType<typeof nodeParseArgs<T>>> {
  const options = config.options ?? {}
  const args = config.args ?? process.argv.slice(2)
  if (!('help' in options) && args.some((arg) => arg === '--help' || arg === '-h')) {
    return { kind: 'help', text: usageText(options, command, about) }
  }
  try {
    return { kind: 'ok', parsed: nodeParseArgs({ ...config, args } as T) }
  } catch (error) {
    return { kind: 'error', text: `error: ${(error as Error).message}\n\n${usageText(options, command)}` }
  }
}

/** `parseArgs` that answers `--help` and bad options itself (stdout / stderr, exit 0 / 2); `about` joins the help. */
export function parseArgs<T extends ParseArgsConfig>(config: T, about?: string): ReturnType<typeof nodeParseArgs<T>> {
  const outcome = parseCliArgs(config, undefined, about)
  if (outcome.kind === 'ok') return outcome.parsed
  if (outcome.kind === 'help') {
    process.stdout.write(`${outcome.text}\n`)
    process.exit(0)
  }
  process.stderr.write(`${outcome.text}\n`)
  process.exit(2)
}

/** A value the parser accepted but the script cannot use (`--scale 5`): the same `error:` line, usage, exit 2. */
export function usageError(config: ParseArgsConfig, message: string): never {
  process.stderr.write(`error: ${message}\n\n${usageText(config.options ?? {})}\n`)
  process.exit(2)
}

type NumberBounds = { integer?: boolean; min?: number; max?: number }

/** Why a numeric option's text is not a plain decimal number within bounds (`1e3`, `0x10`, `x`, empty), or null. */
export function numberOptionProblem(name: string, value: string, bounds: NumberBounds = {}): string | null {
  const { integer = false, min = Number.NEGATIVE_INFINITY, max = Number.POSITIVE_INFINITY } = bounds
  const number = (integer ? /^-?\d+$/ : /^-?\d+(\.\d+)?$/).test(value) ? Number(value) : Number.NaN
  if (number >= min && number <= max) return null
  const range = [min > Number.NEGATIVE_INFINITY ? `≥ ${min}` : '', max < Number.POSITIVE_INFINITY ? `≤ ${max}` : '']
    .filter(Boolean)
    .join(' and ')
  return `--${name} must be ${integer ? 'an integer' : 'a number'}${range ? ` ${range}` : ''}, got "${value}"`
}

/** A numeric option's value, or the usage error naming it (exit 2): never a NaN that runs zero requests. */
export function numberOption(config: ParseArgsConfig, name: string, value: string, bounds: NumberBounds = {}): number {
  const problem = numberOptionProblem(name, value, bounds)
  if (problem) usageError(config, problem)
  return Number(value)
}
