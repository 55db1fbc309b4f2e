/**
 * @module
 * The one JSON nesting limit of the edge. Every JSON body (harness calls of every API, session and
 * task creation, admin bodies) and every runner message is checked right after parsing, so nothing
 * downstream (adapters, schema conversion, records, RPC serialization of results, JSON.stringify)
 * ever sees a value nested deeper than `MAX_JSON_DEPTH`. The check itself is iterative: a body
 * nested 100,000 levels deep costs a loop, never the call stack.
 */

/** Containers (objects and arrays) inside one another; the top-level value counts as level 1. */
export const MAX_JSON_DEPTH = 256

export function jsonDepthMessage(limit = MAX_JSON_DEPTH): string {
  return `JSON nesting exceeds the limit of ${limit} levels`
}

/** Whether `value` nests containers deeper than `limit`. Iterative; stops at the first level beyond. */
export function exceedsJsonDepth(value: unknown, limit = MAX_JSON_DEPTH): boolean {
  if (value === null || typeof value !== 'object') return false
  const nodes: object[] = [value]
  const depths: number[] = [1]
  while (nodes.length) {
    const node = nodes.pop() as object
    const depth = depths.pop() as number
    if (depth > limit) return true
    // Indexed and for-in loops: no copy of an object's values (an engine answer holds arrays of 100k+ ids).
    if (Array.isArray(node)) {
      for (let i = 0; i < node.length; i++) {
        const child: unknown = node[i]
        if (child !== null && typeof child === 'object') {
          nodes.push(child)
          depths.push(depth + 1)
        }
      }
    } else {
      for (const key in node) {
        const child: unknown = (node as Record<string, unknown>)[key]
        if (child !== null && typeof child === 'object') {
          nodes.push(child)
          depths.push(depth + 1)
        }
      }
    }
  }
  return false
}
