/**
 * @module
 * Runner identity: one durable credential per runner id (the SHA-256 of a per-runner secret). The
 * shared runner token only enrols; the first registration of an id mints a secret (32 random bytes,
 * base64url) that is returned once and never stored in clear. Later connections of that id present it
 * and are checked here, in constant time over the hashes, before any socket is accepted or touched.
 * Kept apart from `hub_runners` (schema in `runner-registry.ts`) so a credential outlives a runner
 * that was declared lost; an admin can forget one so a host that lost its state can enrol again.
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

export type CredentialCheck = 'none' | 'valid' | 'invalid'

export class RunnerCredentials {
  readonly #sql: Sql

  /** The schema is created by `ensureHubSchema` (runner-registry.ts). */
  constructor(sql: Sql) {
    this.#sql = sql
  }

  has(runnerId: string): boolean {
    return this.#hash(runnerId) !== null
  }

  /** `none`: no credential yet (enrolment); otherwise whether `secret` is the runner's. */
  async check(runnerId: string, secret: string | null): Promise<CredentialCheck> {
    const stored = this.#hash(runnerId)
    if (stored === null) return 'none'
    // Hash even a missing secret so a refusal takes the same time either way.
    const presented = await sha256Hex(secret ?? '')
    return secret !== null && sameHash(presented, stored) ? 'valid' : 'invalid'
  }

  /** Mint a new secret for `runnerId` (replacing any), store its hash, return the secret (shown once). */
  async mint(runnerId: string, now: number): Promise<string> {
    const secret = bytesToBase64Url(crypto.getRandomValues(new Uint8Array(RUNNER_SECRET_BYTES)))
    const hash = await sha256Hex(secret)
    this.#sql.run(
      `INSERT INTO hub_runner_credentials (runner_id, secret_sha256, enrolled_at) VALUES (?, ?, ?)
       ON CONFLICT (runner_id) DO UPDATE SET secret_sha256 = excluded.secret_sha256, enrolled_at = excluded.enrolled_at`,
      runnerId,
      hash,
      now,
    )
    return secret
  }

  /** Forget a runner's credential (admin); false when there was none. */
  forget(runnerId: string): boolean {
    const had = this.has(runnerId)
    this.#sql.run('DELETE FROM hub_runner_credentials WHERE runner_id = ?', runnerId)
    return had
  }

  #hash(runnerId: string): string | null {
    return (
      this.#sql.first<{ secret_sha256: string }>('SELECT secret_sha256 FROM hub_runner_credentials WHERE runner_id = ?', runnerId)
        ?.secret_sha256 ?? null
    )
  }
}
