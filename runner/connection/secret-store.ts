/**
 * @module
 * The runner's side of runner identity: the per-runner secret the edge mints on first enrolment
 * (`registered.runner_secret`) is kept in `<state dir>/<runner_id>.secret` (mode 0600) and sent as
 * `x-rollgate-runner-secret` on every later connection. Default state dir: `~/.rollgate/runner`
 * (`--state-dir`, `ROLLGATE_RUNNER_STATE_DIR`). The edge holds a minted secret as pending until a
 * connection presents it, and that secret is read from this file: it is written durably first.
 */
import { closeSync, fchmodSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, writeSync } from 'node:fs'
import { homedir } from 'node:os'
import { join } from 'node:path'

export function defaultStateDir(): string {
  return join(homedir(), '.rollgate', 'runner')
}

export class SecretStore {
  readonly path: string

  constructor(stateDir: string, runnerId: string) {
    this.path = join(stateDir, `${runnerId}.secret`)
    this.stateDir = stateDir
  }

  readonly stateDir: string

  read(): string | null {
    try {
      const text = readFileSync(this.path, 'utf8').trim()
      return text || null
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null
      throw error
    }
  }

  /** Durable, atomic write (temp file + fsync + rename + fsync of the directory), owner-only. */
  write(secret: string): void {
    mkdirSync(this.stateDir, { recursive: true, mode: 0o700 })
    const temp = `${this.path}.${process.pid}.tmp`
    const fd = openSync(temp, 'w', 0o600)
    try {
      fchmodSync(fd, 0o600)
      writeSync(fd, `${secret}\n`)
      fsyncSync(fd)
    } finally {
      closeSync(fd)
    }
    renameSync(temp, this.path)
    const dir = openSync(this.stateDir, 'r')
    try {
      fsyncSync(dir)
    } finally {
      closeSync(dir)
    }
  }
}
