/**
 * @module
 * The runner's side of runner identity: the per-runner secret the edge mints on first enrolment
 * (`registered.runner_secret`) is kept in `<state dir>/<runner_id>.secret` (mode 0600) and sent as
 * `x-rollgate-runner-secret` on every later connection. Default state dir: `~/.rollgate/runner`
 * (`--state-dir`, `ROLLGATE_RUNNER_STATE_DIR`).
 */
import { chmodSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
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

  /** Atomic write (temp file + rename), owner-only. */
  write(secret: string): void {
    mkdirSync(this.stateDir, { recursive: true, mode: 0o700 })
    const temp = `${this.path}.${process.pid}.tmp`
    writeFileSync(temp, `${secret}\n`, { mode: 0o600 })
    chmodSync(temp, 0o600)
    renameSync(temp, this.path)
  }
}
