/**
 * @module
 * JSON Lines serialization for the row exports (one JSON object per line, trailing newline).
 */
export function toJsonl(rows: readonly unknown[]): string {
  let out = ''
  for (const row of rows) out += `${JSON.stringify(row)}\n`
  return out
}
