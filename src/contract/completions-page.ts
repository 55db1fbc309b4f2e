/**
 * @module
 * A page of `GET /v1/sessions/:id/completions`: at most 1000 records, cut earlier by size, with
 * `next_after_seq` set while more follow. Tools that read a saved page as a whole session (offline
 * reconstruction, `rollgate replay --records`) refuse one that says more follow, with this message.
 */

/** The message for a saved page that is not the whole session, or null when nothing more follows. */
export function partialPageMessage(json: unknown): string | null {
  const next = json !== null && typeof json === 'object' ? (json as { next_after_seq?: unknown }).next_after_seq : undefined
  if (typeof next !== 'number') return null
  return `this is one page of GET /v1/sessions/:id/completions (next_after_seq ${next}): fetch the next pages with ?after_seq=<next_after_seq> until it is null and put every page's completions in one array, or use \`npx rollgate export\`, which reads the whole session`
}
