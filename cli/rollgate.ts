#!/usr/bin/env node
/**
 * @module
 * `rollgate`: the command-line entry (package.json `bin`). Each command lives in `cli/commands/<name>.ts`
 * and exports `register(program)`; this file only wires them. Flags fall back to environment variables
 * (`ROLLGATE_*`), documented per command in `--help`.
 */
import { Command } from 'commander'
import { COMMANDS } from './commands/index.ts'

const program = new Command('rollgate')
  .description('Token-faithful capture gateway for RL on coding agents: edge, runner, rollouts and exports')
  .showHelpAfterError()
for (const register of COMMANDS) register(program)

await program.parseAsync(process.argv)
