/**
 * @module engine/policy/known-fixes
 * What the stand-in "knows" about bugs: a catalogue of single-line defects and their repairs. The
 * solver policy never edits blindly: it applies an entry only once the buggy line has appeared in a
 * tool result it got back (a file it read, or a sub-agent's report). Entries for the task fixtures
 * under `tasks/`.
 */

export interface KnownFix {
  id: string
  /** The defective line, verbatim with its indentation (unique in its file). */
  buggy: string
  fixed: string
  /** One sentence for the final summary. */
  explanation: string
}

export const KNOWN_FIXES: readonly KnownFix[] = [
  {
    id: 'fix-stats/median-even',
    buggy: '    return (ordered[middle] + ordered[middle + 1]) / 2',
    fixed: '    return (ordered[middle - 1] + ordered[middle]) / 2',
    explanation:
      'for an even number of values `median` averaged `ordered[middle]` and `ordered[middle + 1]`; the two middle values are `ordered[middle - 1]` and `ordered[middle]`',
  },
]

/** The first catalogued defect whose line appears in `text`. */
export function findKnownFix(text: string): KnownFix | null {
  return KNOWN_FIXES.find((fix) => text.includes(fix.buggy.trim())) ?? null
}
