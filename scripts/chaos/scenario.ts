/**
 * @module
 * What every chaos scenario reports: one row of the final table.
 */
export interface ScenarioRow {
  /** Calls the clients sent (attempts, retries included). */
  sent: number
  /** Generation calls the engine served. */
  served: number
  /** Completion records the edge kept (any status). */
  captured: number
  /** Answers a client received that have no matching captured record. Must be 0. */
  lost: number
  /** Outcomes that break a promise of the scenario (listed in notes). Must be 0. */
  errors: number
  /** 5xx answers the edge originated (x-rollgate-error-source: edge). */
  edge_5xx: number
  notes: string[]
  [extra: string]: unknown
}

export interface Scenario {
  id: string
  title: string
  run(options: ScenarioOptions): Promise<ScenarioRow>
}

export interface ScenarioOptions {
  /** Scale factor for counts (1 = the figures; smaller for a quick run). */
  scale: number
  log(line: string): void
}

export function emptyRow(): ScenarioRow {
  return { sent: 0, served: 0, captured: 0, lost: 0, errors: 0, edge_5xx: 0, notes: [] }
}
