/**
 * @module
 * Runner identity: one durable credential per runner id (the SHA-256 of a per-runner secret). The
 * shared runner token only enrols; the first registration of an id mints a secret (32 random bytes,
 * base64url) that is returned once and never stored in clear. Later connections of that id present it
 * and are checked here, in constant time over the hashes, before any socket is accepted or touched.
 * Kept apart from `hub_runners` (schema in `runner-registry.ts`) so a credential outlives a runner
 * that was declared lost; an admin can forget one so a host that lost its state can enrol again.
 *
 * Two-phase enrolment: a minted secret is *pending* until the runner shows it kept it: its `secret.kept`
 * on the enrolling connection, sent once the secret file is written durably, or a later connection that
 * presents it (read from that file). While pending, a connection with only the shared token enrols afresh
 * (a new secret replaces the pending one): a link that dropped after `registered` was sent, or a runner
 * that died before writing its file, needs no human. Once confirmed, the shared token alone is refused.
 */
import { bytesToBase64Url } from '../../contract/base64url.ts'
import type { Sql } from '../session/sql.ts'

export const RUNNER_SECRET_BYTES = 32

async function sha256Hex(text: string): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(text)))
  return [...digest].map((byte) => byte.toString(16).padStart(2, '0')).join('')
}

/** Constant time for equal-length inputs (hashes always are). */
function sameHash(a: string, b: string): boolean {
  if (a.length !== b.length) return false
  let diff = 0
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i)
  return diff === 0
}

/**
 * `none`: no credential (enrol). `pending`: minted but never presented, and no secret sent (enrol
 * again). `valid`: the runner's secret (confirms a pending one). `invalid`: refused.
 */
export type CredentialCheck = 'none' | 'pending' | 'valid' | 'invalid'

export class RunnerCredentials {
  readonly #sql: Sql

  /** The schema is created by `ensureHubSchema` (runner-registry.ts). */
  constructor(sql: Sql) {
    this.#sql = sql
  }

  has(runnerId: string): boolean {
    return this.#row(runnerId) !== null
  }

  /** Check `secret` for `runnerId`; presenting a pending secret confirms it. */
  async check(runnerId: string, secret: string | null): Promise<CredentialCheck> {
    const stored = this.#row(runnerId)
    if (stored === null) return 'none'
    // Hash even a missing secret so a refusal takes the same time either way.
    const presented = await sha256Hex(secret ?? '')
    if (secret !== null && sameHash(presented, stored.secret_sha256)) {
      if (!stored.confirmed) this.#sql.run('UPDATE hub_runner_credentials SET confirmed = 1 WHERE runner_id = ?', runnerId)
      return 'valid'
    }
    return secret === null && !stored.confirmed ? 'pending' : 'invalid'
  }

  /** Mint a pending secret for `runnerId` (replacing any), store its hash, return the secret (shown once). */
  async mint(runnerId: string, now: number): Promise<string> {
    const secret = bytesToBase64Url(crypto.getRandomValues(new Uint8Array(RUNNER_SECRET_BYTES)))
    const hash = await sha256Hex(secret)
    this.#sql.run(
      `INSERT INTO hub_runner_credentials (runner_id, secret_sha256, enrolled_at, confirmed) VALUES (?, ?, ?, 0)
       ON CONFLICT (runner_id) DO UPDATE SET secret_sha256 = excluded.secret_sha256, enrolled_at = excluded.enrolled_at, confirmed = 0`,
      runnerId,
      hash,
      now,
    )
    return secret
  }

  /** Every enrolled runner id and whether its secret was confirmed (presented by a connection). */
  list(): Map<string, 'pending' | 'confirmed'> {
    const rows = this.#sql.all<{ runner_id: string; confirmed: number }>('SELECT runner_id, confirmed FROM hub_runner_credentials')
    return new Map(rows.map((row) => [row.runner_id, row.confirmed !== 0 ? 'confirmed' : 'pending']))
  }

  /** Forget a runner's credential (admin); false when there was none. */
  forget(runnerId: string): boolean {
    const had = this.has(runnerId)
    this.#sql.run('DELETE FROM hub_runner_credentials WHERE runner_id = ?', runnerId)
    return had
  }

  #row(runnerId: string): { secret_sha256: string; confirmed: boolean } | null {
    const row = this.#sql.first<{ secret_sha256: string; confirmed: number }>(
      'SELECT secret_sha256, confirmed FROM hub_runner_credentials WHERE runner_id = ?',
      runnerId,
    )
    return row ? { secret_sha256: row.secret_sha256, confirmed: row.confirmed !== 0 } : null
  }
}
