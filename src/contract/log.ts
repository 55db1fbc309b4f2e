/**
 * @module
 * The edge's log lines. Everything logged goes through here so no session token reaches Workers Logs
 * or a `wrangler dev` terminal: tokens in URLs (`/s/rg_…/`, `?key=rg_…`), messages and stacks are
 * replaced by `rg_…` (`redactSessionTokens`). Request lines carry the redacted path, never the query.
 */
import { redactSessionTokens } from './session-token.ts'

function text(value: unknown): string {
  if (value instanceof Error) return value.stack ?? `${value.name}: ${value.message}`
  if (typeof value === 'string') return value
  try {
    return JSON.stringify(value) ?? String(value)
  } catch {
    return String(value)
  }
}

/** An error line: label and details, session tokens redacted. */
export function logError(label: string, ...details: unknown[]): void {
  console.error(redactSessionTokens([label, ...details.map(text)].join(' ')))
}

/** One structured line per request (Workers Logs indexes JSON): method, redacted path, status, duration. */
export function logRequest(method: string, path: string, status: number, durationMs: number): void {
  console.log(JSON.stringify({ request: { method, path: redactSessionTokens(path), status, ms: Math.round(durationMs) } }))
}
