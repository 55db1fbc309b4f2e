/**
 * @module
 * The list of `rollgate` commands. Each module exports `register(program)` adding one command.
 */
import type { Command } from 'commander'

export type RegisterCommand = (program: Command) => void

/** Add a command module here (one line each). */
export const COMMANDS: readonly RegisterCommand[] = []
