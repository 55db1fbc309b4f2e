/**
 * @module
 * Command-line flags of the repo's own scripts (`npm run dev`, `npm run dev:stack`): `--help` prints the
 * usage and exits 0; an unknown flag or a malformed port prints one line and the usage and exits 2 (never a
 * stack trace).
 */
import { parseArgs, type ParseArgsConfig } from 'node:util'

type StringOptions = Record<string, { type: 'string'; default: string }>

export function scriptArgs<O extends StringOptions>(
  usage: string,
  options: O,
  args: string[] = process.argv.slice(2),
): { [K in keyof O]: string } {
  let values: Record<string, string | boolean | undefined>
  try {
    values = parseArgs({ args, options: { ...options, help: { type: 'boolean', short: 'h' } } } satisfies ParseArgsConfig).values
  } catch (error) {
    return fail(usage, (error as Error).message)
  }
  if (values.help) {
    process.stdout.write(`${usage}\n`)
    process.exit(0)
  }
  for (const name of Object.keys(options)) {
    const value = String(values[name])
    if (/port$/.test(name) && !(/^\d+$/.test(value) && Number(value) <= 65535))
      return fail(usage, `--${name} must be a port number (0-65535), got "${value}"`)
  }
  return values as { [K in keyof O]: string }
}

function fail(usage: string, message: string): never {
  process.stderr.write(`error: ${message}\n\n${usage}\n`)
  process.exit(2)
}
