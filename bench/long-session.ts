/**
 * @module
 * `npm run bench:long-session`: one long agent session through the real edge (the bundled Worker in
 * Miniflare/workerd, SessionObject SQLite, R2 emulation) against the stand-in engine (real Qwen3
 * tokenizer and template, `script` policy: a tool call every turn, a text tool result back).
 *
 * Two sessions, both reported (pick with the flag; the figures differ a lot for prefix_merging):
 * - default: Qwen3 thinking on, a short reasoning each turn, and the agent sends it back (`reasoning_content`,
 *   as the edge returns it). Qwen3's template re-renders the reasoning of every assistant turn after the last user
 *   message, so each prompt extends the previous prompt + its sampled tokens exactly: prefix_merging (any
 *   preset) yields **one trace**. This is issue #15's session.
 * - `--strip-thinking`: `enable_thinking: false`. The generation prompt ends with the empty scaffold
 *   `<think>\n\n</think>\n\n` (4 tokens) that the history does not re-render, so turn k's training context
 *   differs from its prompt by 4 tokens per earlier turn of its trace; the `tolerant` preset's bound
 *   (`max_context_drift_tokens` 64, cumulative) starts a new segment every 17 turns (12 traces at 200 turns,
 *   59 at 1,000), `exact` one per call. That cut is the documented drift rule, not a storage or routing bound.
 *
 * Flags: `--turns` (200), `--result-tokens` (≈ tokens of tool output per turn, 500), `--strip-thinking`, `--skip-per-request`,
 * `--calls-only` (stop after the turns: per-call figures only, incl. Server-Timing `capture` p50 of the first
 * and last 10 turns), `--keep-sqlite <path>` (keep a copy of the session's SQLite, to profile finalize in Node),
 * `--keep-persist <dir>` (Miniflare's persistence directory before finalize, for `bench/finalize-ab.ts`),
 * `--profile-finalize <file>` (a workerd CPU profile of the prefix_merging finalize, over the DevTools inspector;
 * the inspector slows workerd down: not for the figures), `--profile-calls <file>` (the same over the last 20 turns), `--edge-bundle DIR/index.js` (a prebuilt edge).
 * Figures: edge cost per call (Server-Timing prepare + capture) over the first and last 10 turns, and workerd's
 * CPU per call (/proc: every workerd thread, so edge + session object, not the engine; wall times on a loaded
 * machine mostly measure the wait for a core); stored
 * token bytes ÷ floor (4 B × final prompt + 8 B × output tokens); stored request text ÷ final request
 * body; finalize and GET trajectory times (first byte and total) and workerd's CPU during finalize for both builders (finalize closes a
 * session, so per_request runs on a twin session fed the same bodies in lockstep); workerd RSS after the
 * turns and at its peak after finalize (sampled every 50 ms). workerd does not expose a Durable Object's
 * JS heap, so the heap figure comes from the same plain classes in Node over a copy of the session's
 * SQLite (`bench/lib/finalize-in-node.ts`, `--max-old-space-size=128`): `node_128mb.*`, with a Polar-strict row
 * (`prefix_merging_strict`, `preset: strict`; `--skip-strict` leaves it out).
 * Last line: one JSON object, opening with `summary` (the figures issue #15 sets targets on: finalize wall and
 * workerd CPU per builder, trace count, first byte, capture p50 of the last 10 turns, storage ratios).
 */
import { execFileSync, spawnSync } from 'node:child_process'
import { copyFileSync, cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { DatabaseSync } from 'node:sqlite'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from '../scripts/lib/cli-args.ts'
import { startEngine } from '../engine/server.ts'
import { startMiniflareEdge } from '../scripts/lib/miniflare-edge.ts'
import { profileWorkerd, startWorkerdProfile } from './lib/devtools.ts'
import { cpuMs, workerdPids as findWorkerdPids } from './lib/proc-stats.ts'
import { type AgentAnswer, agentScript, appendTurn, firstMessages, TOOLS } from './lib/long-session-agent.ts'
import { upperMedian as median } from './lib/stats.ts'

const { values } = parseArgs({
  options: {
    turns: { type: 'string', default: '200' },
    'result-tokens': { type: 'string', default: '500' },
    'skip-per-request': { type: 'boolean', default: false },
    /** Leave out the Polar-strict row of `node_128mb` (finalize with `preset: strict` in Node under a 128 MB heap). */
    'skip-strict': { type: 'boolean', default: false },
    /** `enable_thinking: false` (the scaffold is not re-rendered: prefix_merging splits by its drift bound). */
    'strip-thinking': { type: 'boolean', default: false },
    /** Stop after the turns: report the per-call figures only (no storage, finalize or GET figures). */
    'calls-only': { type: 'boolean', default: false },
    /** prefix_merging preset (main's default became `exact`, which splits this session's turns). */
    preset: { type: 'string', default: 'tolerant' },
    /** GET reads at most this many MB (then cancels): first byte and rate are what matter. */
    'get-mb': { type: 'string', default: '32' },
    /** Also copy the session's SQLite to this path (to profile `bench/lib/finalize-in-node.ts` on it). */
    'keep-sqlite': { type: 'string' },
    /** Copy Miniflare's persistence directory to this path after the turns, before finalize (`bench/finalize-ab.ts` replays finalize on it). */
    'keep-persist': { type: 'string' },
    /** Where Miniflare keeps the session's SQLite and R2 (e.g. `/dev/shm`: the disk's sync waits out of the figures). */
    'persist-dir': { type: 'string', default: tmpdir() },
    /** Write a V8 CPU profile of workerd during the prefix_merging finalize to this file (DevTools inspector). */
    'profile-finalize': { type: 'string' },
    /** Write a V8 CPU profile of workerd during the last 20 turns to this file (edge and session object: one isolate). */
    'profile-calls': { type: 'string' },
    /** Run a prebuilt edge (`npx wrangler deploy --dry-run --outdir DIR` → `DIR/index.js`) instead of bundling this tree. */
    'edge-bundle': { type: 'string' },
  },
})
const TURNS = Number(values.turns)
const RESULT_TOKENS = Number(values['result-tokens'])
const STRIP_THINKING = values['strip-thinking'] === true
const ADMIN = 'bench-admin-token'
const script = agentScript(TURNS)

const round = (value: number, digits = 2) => Math.round(value * 10 ** digits) / 10 ** digits

let workerdPids: number[] | null = null
/** RSS (MB) of the workerd processes this bench started (children of this process), read from /proc (cheap, no fork). */
function workerdRssMb(): number {
  try {
    workerdPids ??= execFileSync('ps', ['-o', 'pid=,comm=', '--ppid', String(process.pid)], { encoding: 'utf8' })
      .split('\n')
      .filter((line) => line.includes('workerd'))
      .map((line) => Number(line.trim().split(/\s+/)[0]))
    let kb = 0
    for (const pid of workerdPids) {
      const match = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
      kb += Number(match?.[1] ?? 0)
    }
    return round(kb / 1024, 0)
  } catch {
    return 0
  }
}

/** Run `work` while sampling workerd RSS; returns its result and the peak. */
async function withPeakRss<T>(work: () => Promise<T>): Promise<{ result: T; peakMb: number }> {
  let peakMb = workerdRssMb()
  const timer = setInterval(() => {
    peakMb = Math.max(peakMb, workerdRssMb())
  }, 50)
  try {
    const result = await work()
    return { result, peakMb: Math.max(peakMb, workerdRssMb()) }
  } finally {
    clearInterval(timer)
  }
}

function parseTiming(header: string | null): Record<string, number> {
  const out: Record<string, number> = {}
  for (const part of (header ?? '').split(',')) {
    const match = /^\s*(\w+);dur=([\d.]+)/.exec(part)
    if (match) out[match[1] as string] = Number(match[2])
  }
  return out
}

const engine = await startEngine({ seed: 3, policy: 'script', script, maxModelLen: 1_048_576 })
const persistTo = mkdtempSync(join(values['persist-dir'] ?? tmpdir(), 'rollgate-bench-long-'))
const edge = await startMiniflareEdge({
  persistTo,
  ...(values['edge-bundle'] ? { scriptPath: values['edge-bundle'] } : {}),
  ...(values['profile-finalize'] || values['profile-calls'] ? { inspector: true } : {}),
  vars: { ROLLGATE_ADMIN_TOKEN: ADMIN, ROLLGATE_SIGNING_KEY: 'k', ROLLGATE_UPSTREAM_URL: engine.url },
})
const admin = { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' }
async function newSession(): Promise<{ session_id: string; token: string }> {
  return (await (await fetch(`${edge.url}/v1/sessions`, { method: 'POST', headers: admin, body: '{}' })).json()) as {
    session_id: string
    token: string
  }
}

/** The session's SQLite file in Miniflare's persistence directory (found by the config it holds). */
function sessionSqlite(sessionId: string): string | null {
  const dir = join(persistTo, 'do', '-SessionObject')
  if (!existsSync(dir)) return null
  for (const name of readdirSync(dir)) {
    if (!name.endsWith('.sqlite') || name === 'metadata.sqlite') continue
    const db = new DatabaseSync(join(dir, name), { readOnly: true })
    try {
      const row = db.prepare("SELECT value FROM rg_meta WHERE key = 'session'").get() as { value: string } | undefined
      if (row && (JSON.parse(row.value) as { session_id: string }).session_id === sessionId) return join(dir, name)
    } catch {
      // not a session file
    } finally {
      db.close()
    }
  }
  return null
}

let nodeRuns: Record<string, unknown> = {}
let finalFigures: Record<string, unknown> | null = null
try {
  const builders = values['skip-per-request'] ? ['prefix_merging'] : ['prefix_merging', 'per_request']
  const sessions = await Promise.all(builders.map(() => newSession()))
  const session = sessions[0] as { session_id: string; token: string }
  const messages = firstMessages()
  const edgeMs: number[] = []
  const prepareMs: number[] = []
  const captureMs: number[] = []
  /** workerd's CPU (every thread, from /proc) per measured call: edge, session object, not the engine. */
  const callCpuMs: number[] = []
  const cpuPids = findWorkerdPids()
  let finalBodyBytes = 0
  let finalPromptTokens = 0
  const started = performance.now()
  let callsProfile: { stop(): Promise<unknown> } | null = null
  for (let turn = 0; turn < TURNS; turn++) {
    if (values['profile-calls'] && edge.inspectorUrl && turn === Math.max(0, TURNS - 20)) {
      callsProfile = await startWorkerdProfile(edge.inspectorUrl)
    }
    const body = JSON.stringify({
      model: 'bench',
      messages,
      tools: TOOLS,
      ...(STRIP_THINKING ? { chat_template_kwargs: { enable_thinking: false } } : {}),
    })
    finalBodyBytes = Buffer.byteLength(body)
    // One after the other: the measured session's Server-Timing must not include the twin's work.
    const post = (token: string) =>
      fetch(`${edge.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body,
      })
    const cpuBefore = cpuMs(cpuPids)
    const response = await post(session.token)
    const answerBytes = await response.arrayBuffer()
    callCpuMs.push(cpuMs(cpuPids) - cpuBefore)
    for (const twin of sessions.slice(1)) await (await post(twin.token)).arrayBuffer()
    if (response.status !== 200) throw new Error(`turn ${turn}: ${response.status} ${Buffer.from(answerBytes).toString('utf8')}`)
    const timing = parseTiming(response.headers.get('server-timing'))
    edgeMs.push((timing.prepare ?? 0) + (timing.capture ?? 0))
    prepareMs.push(timing.prepare ?? 0)
    captureMs.push(timing.capture ?? 0)
    const answer = JSON.parse(Buffer.from(answerBytes).toString('utf8')) as AgentAnswer
    finalPromptTokens = answer.usage.prompt_tokens
    appendTurn(messages, answer, turn, RESULT_TOKENS)
    if ((turn + 1) % 50 === 0) {
      console.log(
        `turn ${turn + 1}: prompt ${finalPromptTokens} tokens, edge ${edgeMs.at(-1)?.toFixed(2)} ms, capture p50 of the last 10 ${median(captureMs.slice(-10)).toFixed(2)} ms`,
      )
    }
  }
  const turnsSeconds = (performance.now() - started) / 1000
  if (callsProfile && values['profile-calls']) writeFileSync(values['profile-calls'], JSON.stringify(await callsProfile.stop()))
  if (values['calls-only']) {
    finalFigures = {
      session: STRIP_THINKING ? 'strip-thinking' : 'reasoning-replayed',
      turns: TURNS,
      result_tokens: RESULT_TOKENS,
      turns_seconds: round(turnsSeconds, 1),
      final_prompt_tokens: finalPromptTokens,
      final_request_body_bytes: finalBodyBytes,
      edge_ms_per_call_first10_p50: round(median(edgeMs.slice(0, 10))),
      edge_ms_per_call_last10_p50: round(median(edgeMs.slice(-10))),
      capture_ms_first10_p50: round(median(captureMs.slice(0, 10))),
      capture_ms_last10_p50: round(median(captureMs.slice(-10))),
      capture_ms_last100_p50: round(median(captureMs.slice(-100))),
      workerd_cpu_ms_per_call_first10_p50: round(median(callCpuMs.slice(0, 10))),
      workerd_cpu_ms_per_call_last10_p50: round(median(callCpuMs.slice(-10))),
      workerd_cpu_ms_per_call_last100_p50: round(median(callCpuMs.slice(-100))),
      load_average_1m: round(loadavg()[0] ?? 0),
    }
  }
  if (!values['calls-only']) {
    const keepPersist = values['keep-persist']
    if (keepPersist) cpSync(persistTo, keepPersist, { recursive: true })
    const rssAfterTurns = workerdRssMb()
    const info = (await (await fetch(`${edge.url}/v1/sessions/${session.session_id}`, { headers: admin })).json()) as {
      storage: { unique_prompt_tokens: number; output_tokens: number; token_bytes: number; text_bytes: number; prompt_tokens_total: number }
    }
    const s = info.storage
    const floor = 4 * finalPromptTokens + 8 * s.output_tokens

    const getMax = Number(values['get-mb']) * 1024 * 1024
    /** GET …/trajectory: status, first byte, and the rate over at most `get-mb` MB (then cancelled). */
    const timedGet = async (sessionId: string, query: string) => {
      const t0 = performance.now()
      let firstByteMs: number | null = null
      let bytes = 0
      let status = 0
      let complete = false
      try {
        const get = await fetch(`${edge.url}/v1/sessions/${sessionId}/trajectory?${query}`, { headers: admin })
        status = get.status
        const reader = get.body?.getReader()
        for (;;) {
          const chunk = await reader?.read()
          if (!chunk || chunk.done) {
            complete = true
            break
          }
          firstByteMs ??= performance.now() - t0
          bytes += chunk.value.byteLength
          if (bytes >= getMax) {
            await reader?.cancel()
            break
          }
        }
      } catch {
        status = -1
      }
      const ms = performance.now() - t0
      return {
        status,
        first_byte_ms: firstByteMs === null ? null : round(firstByteMs, 0),
        ms: round(ms, 0),
        bytes,
        complete,
        mb_per_s: round(bytes / 1024 / 1024 / (ms / 1000), 1),
      }
    }
    const builderConfig = (builder: string) => (builder === 'prefix_merging' ? { preset: values.preset } : null)
    const builderQuery = (builder: string) => {
      const config = builderConfig(builder)
      return `builder=${builder}${config ? `&config=${encodeURIComponent(JSON.stringify(config))}` : ''}`
    }

    const finalize: Record<string, unknown> = {}
    let peakRss = rssAfterTurns
    for (const [index, builder] of builders.entries()) {
      const sessionId = (sessions[index] as { session_id: string }).session_id
      const { result, peakMb } = await withPeakRss(async () => {
        // Before finalize: built from the log while it is sent.
        const built = await timedGet(sessionId, builderQuery(builder))
        const t0 = performance.now()
        const cpu0 = cpuMs(cpuPids)
        let status = 0
        let text = ''
        try {
          const config = builderConfig(builder)
          const call = async () => {
            const response = await fetch(`${edge.url}/v1/sessions/${sessionId}/finalize`, {
              method: 'POST',
              headers: admin,
              body: JSON.stringify(config ? { builder, config } : { builder }),
            })
            return { status: response.status, text: await response.text() }
          }
          const profileTo = values['profile-finalize']
          let answer: { status: number; text: string }
          if (profileTo && builder === 'prefix_merging' && edge.inspectorUrl) {
            const profiled = await profileWorkerd(edge.inspectorUrl, call)
            writeFileSync(profileTo, JSON.stringify(profiled.profile))
            answer = profiled.result
          } else answer = await call()
          status = answer.status
          text = answer.text
        } catch (error) {
          text = `edge failed: ${(error as Error).message}`
        }
        const ms = performance.now() - t0
        const workerdCpu = cpuMs(cpuPids) - cpu0
        const answer = status === 200 ? (JSON.parse(text) as { trajectory_bytes?: number; trace_count?: number }) : null
        // After finalize: the stored object, from R2.
        const stored = await timedGet(sessionId, builderQuery(builder))
        return {
          finalize_status: status,
          finalize_ms: round(ms, 0),
          /** workerd's CPU over the finalize call (its R2 writes land in Miniflare's Node process: not counted). */
          finalize_workerd_cpu_ms: round(workerdCpu, 0),
          finalize_answer: answer ?? text.slice(0, 200),
          finalize_mb_per_s: answer?.trajectory_bytes ? round(answer.trajectory_bytes / 1024 / 1024 / (ms / 1000), 1) : null,
          get_built: built,
          get_stored: stored,
        }
      })
      peakRss = Math.max(peakRss, peakMb)
      finalize[builder] = { ...result, workerd_rss_peak_mb: peakMb }
      console.log(`${builder}: ${JSON.stringify(finalize[builder])}`)
    }

    const first = edgeMs.slice(0, 10)
    const last = edgeMs.slice(-10)
    const figures = {
      session_id: session.session_id,
      session: STRIP_THINKING ? 'strip-thinking' : 'reasoning-replayed',
      persist_dir: values['persist-dir'],
      turns: TURNS,
      result_tokens: RESULT_TOKENS,
      turns_seconds: round(turnsSeconds, 1),
      final_prompt_tokens: finalPromptTokens,
      final_request_body_bytes: finalBodyBytes,
      edge_ms_per_call_first10_p50: round(median(first)),
      edge_ms_per_call_last10_p50: round(median(last)),
      prepare_ms_last10_p50: round(median(prepareMs.slice(-10))),
      capture_ms_first10_p50: round(median(captureMs.slice(0, 10))),
      capture_ms_last10_p50: round(median(captureMs.slice(-10))),
      workerd_cpu_ms_per_call_first10_p50: round(median(callCpuMs.slice(0, 10))),
      workerd_cpu_ms_per_call_last10_p50: round(median(callCpuMs.slice(-10))),
      workerd_cpu_ms_per_call_last100_p50: round(median(callCpuMs.slice(-100))),
      unique_prompt_tokens_stored: s.unique_prompt_tokens,
      unique_over_final_prompt: round(s.unique_prompt_tokens / finalPromptTokens),
      output_tokens: s.output_tokens,
      floor_bytes: floor,
      token_bytes: s.token_bytes,
      token_bytes_over_floor: round(s.token_bytes / floor),
      request_text_bytes: s.text_bytes,
      request_text_over_final_body: round(s.text_bytes / finalBodyBytes),
      finalize,
      workerd_rss_after_turns_mb: rssAfterTurns,
      workerd_rss_peak_after_finalize_mb: peakRss,
    }
    finalFigures = figures
  }
} finally {
  await edge.stop()
  await engine.close()
}
if (values['calls-only']) {
  rmSync(persistTo, { recursive: true, force: true })
  if (finalFigures) console.log(JSON.stringify(finalFigures))
}
// The same plain classes in Node under a Durable Object's 128 MB, over a copy of the session's SQLite.
else if (finalFigures) {
  const sessionId = (finalFigures as { session_id: string }).session_id
  const source = sessionSqlite(sessionId)
  if (source) {
    const copy = join(persistTo, 'node-copy.sqlite')
    copyFileSync(source, copy)
    for (const suffix of ['-wal', '-shm']) if (existsSync(source + suffix)) copyFileSync(source + suffix, copy + suffix)
    const keep = values['keep-sqlite']
    if (keep) for (const suffix of ['', '-wal', '-shm']) if (existsSync(copy + suffix)) copyFileSync(copy + suffix, keep + suffix)
    // [row, builder, config]: Polar-strict (`preset: strict`) as its own row (here a trace per turn: O(turns²) bytes).
    const rows: [string, string, Record<string, unknown> | null][] = [['prefix_merging', 'prefix_merging', { preset: values.preset }]]
    if (!values['skip-per-request']) rows.push(['per_request', 'per_request', null])
    if (!values['skip-strict']) rows.push(['prefix_merging_strict', 'prefix_merging', { preset: 'strict' }])
    for (const [row, builder, config] of rows) {
      const args = ['--max-old-space-size=128', 'bench/lib/finalize-in-node.ts', copy, builder, ...(config ? [JSON.stringify(config)] : [])]
      const run = spawnSync(process.execPath, args, { encoding: 'utf8', timeout: 900_000 })
      const line = run.stdout.trim().split('\n').at(-1) ?? ''
      nodeRuns[row] = run.status === 0 ? JSON.parse(line) : { failed: true, status: run.status, stderr: run.stderr.slice(-400) }
      console.log(`node --max-old-space-size=128 ${row}: ${JSON.stringify(nodeRuns[row])}`)
    }
  } else nodeRuns = { skipped: 'session SQLite not found in the persistence directory' }
  rmSync(persistTo, { recursive: true, force: true })
  console.log(JSON.stringify({ summary: summaryOf(finalFigures), ...finalFigures, node_128mb: nodeRuns }))
} else rmSync(persistTo, { recursive: true, force: true })

/** The figures issue #15 sets targets on, first in the last line (the rest follows in full). */
function summaryOf(figures: Record<string, unknown>): Record<string, unknown> {
  const finalize = (figures.finalize ?? {}) as Record<string, Record<string, unknown>>
  const per = (pick: (run: Record<string, unknown>) => unknown) =>
    Object.fromEntries(Object.entries(finalize).map(([builder, run]) => [builder, pick(run)]))
  const answer = (run: Record<string, unknown>) => (run.finalize_answer ?? {}) as Record<string, unknown>
  const get = (run: Record<string, unknown>, which: string) => (run[which] ?? {}) as Record<string, unknown>
  return {
    session: figures.session,
    turns: figures.turns,
    trace_count: per((run) => answer(run).trace_count ?? null),
    finalize_ms: per((run) => run.finalize_ms),
    finalize_workerd_cpu_ms: per((run) => run.finalize_workerd_cpu_ms),
    trajectory_mb: per((run) => Math.round(((answer(run).trajectory_bytes as number) ?? 0) / 10_485.76) / 100),
    first_byte_ms_get_built: per((run) => get(run, 'get_built').first_byte_ms),
    first_byte_ms_get_stored: per((run) => get(run, 'get_stored').first_byte_ms),
    capture_ms_last10_p50: figures.capture_ms_last10_p50,
    workerd_cpu_ms_per_call_last10_p50: figures.workerd_cpu_ms_per_call_last10_p50,
    token_bytes_over_floor: figures.token_bytes_over_floor,
    request_text_over_final_body: figures.request_text_over_final_body,
  }
}
