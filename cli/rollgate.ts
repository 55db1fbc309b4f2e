#!/usr/bin/env node
/**
 * @module
 * `rollgate`: the command-line entry (package.json `bin`). Each command lives in `cli/commands/<name>.ts`
 * and exports `register(program)`; this file only wires them. Flags fall back to environment variables
 * (`ROLLGATE_*`), documented per command in `--help`.
 */
import { Command } from 'commander'
import { COMMANDS } from './commands/index.ts'
import { EXIT } from './lib/common-options.ts'

// `rollgate export s1 | head`: the reader went away. Stop quietly, as other command-line tools do, instead of
// dying on an EPIPE stack trace (a write error that is not that is still thrown).
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code === 'EPIPE') process.exit(EXIT.ok)
  throw error
})

const program = new Command('rollgate')
  .description('Token-faithful capture gateway for RL on coding agents: edge, runner, rollouts and exports')
  .showHelpAfterError()
  // A mistyped command, flag or choice is bad input: exit 2 as the README's exit codes say (commander's own
  // default is 1, which means "the outcome was a failure"). Set before the commands so each inherits it.
  .exitOverride((error) => process.exit(error.exitCode === 0 ? EXIT.ok : EXIT.usage))
for (const register of COMMANDS) register(program)

await program.parseAsync(process.argv)
