/**
 * @module
 * Engine base URLs as the edge accepts them (session creation, task `upstream.url`, the configured
 * default): http(s) only, and never with credentials in them. User info (`user:pass@`) is removed
 * before the URL is stored, so it is never kept, repeated in a record's `provenance.upstream_url`, or
 * sent; a hosted upstream authenticates with `ROLLGATE_UPSTREAM_API_KEY`, which goes only to the
 * configured upstream's origin.
 */
import { z } from 'zod'

/** The URL without user info (unchanged, byte for byte, when it has none or does not parse). */
export function withoutCredentials(url: string): string {
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    return url
  }
  if (!parsed.username && !parsed.password) return url
  parsed.username = ''
  parsed.password = ''
  return parsed.toString()
}

export const upstreamUrlSchema = z.url({ protocol: /^https?$/ }).transform(withoutCredentials)
