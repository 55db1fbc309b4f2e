/**
 * @module
 * The list of `rollgate` commands. Each module exports `register(program)` adding its command(s).
 */
import type { Command } from 'commander'
import { register as exportCommand } from './export.ts'
import { register as gate } from './gate.ts'
import { register as generateSft } from './generate-sft.ts'
import { register as passthrough } from './passthrough.ts'
import { register as replay } from './replay.ts'
import { register as runner } from './runner.ts'
import { register as runners } from './runners.ts'
import { register as sessions } from './sessions.ts'
import { register as status } from './status.ts'
import { register as submit } from './submit.ts'

export type RegisterCommand = (program: Command) => void

/** Add a command module here (one line each). */
export const COMMANDS: readonly RegisterCommand[] = [
  passthrough,
  submit,
  status,
  sessions,
  exportCommand,
  gate,
  replay,
  runner,
  runners,
  generateSft,
]
