/**
 * @module
 * Branch labels, per agent (`metadata.branch`), so trainers can filter traces:
 * - `main`: the agent's longest chain (most completions; earliest on a tie), and its continuation
 *   segments after breaks;
 * - `compaction`: segments of the main chain from a `compaction` break on (history rewritten or
 *   summarized into a shorter context, the old context never continued);
 * - `retry`: attempts superseded by a re-send of the same prompt, re-sends kept out of the chain;
 * - `side_call`: a single completion without tools that no later completion extends (title,
 *   routing or classifier calls);
 * - `sub_agent`: any other chain, and side branches of a chain (its predecessor went on after it).
 */
import type { BranchLabel } from '../contract/trajectory.ts'
import { requestTools } from './extract-trace.ts'
import type { Segment } from './segment.ts'

function isSideCall(segments: readonly Segment[]): boolean {
  const only = segments.length === 1 ? segments[0] : undefined
  if (only === undefined || only.turns.length !== 1) return false
  const record = only.turns[0]?.record
  return record !== undefined && requestTools(record) === null
}

/** Assign `segment.branch` for every segment (creation order). */
export function labelBranches(segments: readonly Segment[]): void {
  const chains = new Map<number, Segment[]>()
  for (const segment of segments) {
    const list = chains.get(segment.chain)
    if (list === undefined) chains.set(segment.chain, [segment])
    else list.push(segment)
  }

  // Main chain per agent: most completions among chains that started as a root; then one that
  // offers tools (side calls do not); then the earliest.
  const mainChain = new Map<string, { chain: number; rank: [number, number, number] }>()
  for (const [chain, list] of chains) {
    const first = list[0] as Segment
    if (first.origin !== 'root') continue
    const size = list.reduce((sum, segment) => sum + segment.turns.length, 0)
    const firstRecord = first.turns[0]?.record
    const tools = firstRecord !== undefined && requestTools(firstRecord) !== null ? 1 : 0
    const rank: [number, number, number] = [size, tools, -first.firstSeq]
    const best = mainChain.get(first.agent)
    if (best === undefined || compareRank(rank, best.rank) > 0) mainChain.set(first.agent, { chain, rank })
  }

  for (const segment of segments) {
    segment.branch = labelOf(segment, segments, chains, mainChain.get(segment.agent)?.chain)
  }
}

function compareRank(a: readonly number[], b: readonly number[]): number {
  for (let i = 0; i < a.length; i++) {
    const diff = (a[i] ?? 0) - (b[i] ?? 0)
    if (diff !== 0) return diff
  }
  return 0
}

function labelOf(
  segment: Segment,
  segments: readonly Segment[],
  chains: ReadonlyMap<number, Segment[]>,
  mainChain: number | undefined,
): BranchLabel {
  if (segment.origin === 'retry' || segment.origin === 'superseded') return 'retry'
  if (segment.origin === 'root' || segment.origin === 'fork') {
    if (segment.chain === mainChain) return 'main'
    return isSideCall(chains.get(segment.chain) ?? []) ? 'side_call' : 'sub_agent'
  }
  // A break: same chain as its parent segment.
  const parent = segment.parent === null ? undefined : segments[segment.parent]
  if (parent === undefined) return 'main'
  const sideBranch = parent.lastAppendSeq > segment.firstSeq
  if (sideBranch) {
    // Its predecessor went on afterwards: a branch off the conversation, not a rewrite of it.
    if (segment.breakReason === 'compaction') segment.breakReason = 'prefix_mismatch'
    return isSideCall([segment]) ? 'side_call' : 'sub_agent'
  }
  if (segment.breakReason === 'compaction') return 'compaction'
  return parent.branch ?? 'main'
}
