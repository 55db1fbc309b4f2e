/**
 * @module
 * `rollgate engine …` (the stand-in vLLM-compatible engine) and `rollgate dev …` (the edge under
 * `wrangler dev`, or `--stack` for engine + edge): thin wrappers over the package's own scripts, so the CLI
 * offers every entry point with the scripts' own flags (`rollgate engine --help`).
 */
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import type { Command } from 'commander'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))

/** Run a package script with this Node, forwarding signals; resolves with its exit code. */
export function runScript(script: string, args: readonly string[]): Promise<number> {
  const child = spawn(process.execPath, [`${ROOT}${script}`, ...args], { stdio: 'inherit' })
  const forward = (signal: NodeJS.Signals) => child.kill(signal)
  process.on('SIGINT', forward)
  process.on('SIGTERM', forward)
  return new Promise((resolve) => {
    child.on('exit', (code, signal) => {
      process.off('SIGINT', forward)
      process.off('SIGTERM', forward)
      resolve(code ?? (signal ? 128 + 2 : 1))
    })
  })
}

function passthrough(program: Command, name: string, description: string, script: (args: string[]) => string): void {
  program
    .command(name)
    .description(description)
    .helpOption(false)
    .allowUnknownOption(true)
    .allowExcessArguments(true)
    .argument('[args...]')
    .action(async (args: string[]) => {
      process.exitCode = await runScript(
        script(args),
        args.filter((arg) => arg !== '--stack'),
      )
    })
}

export function register(program: Command): void {
  passthrough(program, 'engine', 'stand-in vLLM-compatible engine (flags: see `rollgate engine --help`)', () => 'engine/cli.ts')
  passthrough(program, 'dev', 'the edge under wrangler dev (`--stack`: engine + edge)', (args) =>
    args.includes('--stack') ? 'scripts/dev-stack.ts' : 'scripts/dev.ts',
  )
}
