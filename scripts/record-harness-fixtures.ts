/**
 * @module
 * Record real request fixtures from the six coding-harness CLIs (Claude Code, Codex, Gemini CLI, Qwen Code,
 * opencode, pi) through the real edge, and report how each run went.
 *
 * ```sh
 * npx node scripts/record-harness-fixtures.ts                    # every variant (about 1 min)
 * npx node scripts/record-harness-fixtures.ts --only claude-code,pi-anthropic --timeout-s 90
 * npx node scripts/record-harness-fixtures.ts --no-write         # run and report, write no fixtures
 * npx node scripts/record-harness-fixtures.ts --scenario fix-stats # the multi-step task (about 6 min)
 * ```
 * Scenarios: `hello` (default: `create hello.txt containing hi`, the engine's `scripted` policy, 2–3 calls) and
 * `fix-stats` (the `tasks/fix-stats` fixture copied into the work dir as a git repo, its instruction, the
 * engine's `solver` policy, 11+ calls; solved when its pytest suite passes).
 * Other flags: `--runs-dir` (default `/var/tmp/rollgate-harness-runs`),
 * `--max-model-len` (engine window, default 262144: Claude Code asks for `max_tokens` 128000, Qwen Code 32768,
 * opencode 32000, so a 32k window fails them; see the report), `--verbose` (wrangler output).
 *
 * The harnesses are the runner's own modules (`runner/harness/*`, single source of truth): pinned package,
 * config files, env and command per variant. Outside the sandbox it installs the CLIs the selected variants
 * need into the per-host harness cache (`runner/harness/install.ts`; `ROLLGATE_HARNESS_CACHE`; the
 * devDependency copy when its version matches), then re-executes itself inside a fresh network namespace
 * whose only interface is loopback
 * (`unshare -n` as root, `unshare --user --map-root-user -n` otherwise) and refuses to go on if it sees any
 * other interface. Inside, once for all variants: the stand-in engine, the edge (`wrangler dev`), and a
 * transparent tap in front of the edge that forwards bytes unchanged and notes each request's path, headers
 * and answer (the completion record keeps the body, not the path or headers). Then per variant
 * (`cliVariants()`: each CLI's default wire plus its other wires/modes): a capture session (admin API); a
 * throwaway HOME and work dir under `--runs-dir` (Codex refuses its helper binaries under the system temp
 * dir); the harness module's rendered files, env (on a minimal env, not this process's) and steps, on
 * `create hello.txt containing hi`, each step under `bash -c` in its own process group, output in
 * `<runs-dir>/<variant>/logs/agent/<step>.{stdout,stderr}.log`, killed after `--timeout-s` (default 120).
 * Telemetry and update checks fail at once: there is no route out.
 *
 * Each captured completion's `original_request` becomes
 * `src/normalize/providers/<api>/__fixtures__/<variant>-<scenario>.<n>.request.json` as `{path, headers, body}`
 * (the contract tests' fixture shape), scrubbed: the session token (`<SESSION_TOKEN>`, also in auth headers)
 * and key-like strings, UUIDs / 64-hex / opencode ids (user, device, session, item ids → stable placeholders
 * per run, so turn 2 still repeats turn 1's ids), the run's absolute paths (`/workspace/project`,
 * `/home/agent`, the CLIs' install dir → `/usr/local/lib/node_modules`), Claude Code's billing-header nonce.
 * A re-recorded variant's old fixtures are removed first.
 *
 * Per variant it prints the exit code, the calls the tap saw, the captured APIs and record statuses, token
 * continuity between consecutive calls, whether `hello.txt` holds `hi`, and every edge answer ≥ 400 or error
 * frame inside a 2xx stream (the request is kept, scrubbed, under `<runs-dir>/<variant>/failures/`). Logs,
 * the scrubbed completion records and `summary.json` stay in `--runs-dir`.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process'
import { closeSync, cpSync, existsSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer, type IncomingHttpHeaders, request as httpRequest, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { networkInterfaces, tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { isDeepStrictEqual } from 'node:util'
import { brotliDecompressSync, gunzipSync, inflateSync } from 'node:zlib'
import { startEngine } from '../engine/server.ts'
import type { Harness, HarnessStep, HarnessVariant } from '../runner/harness/harness.ts'
import { cliVariants } from '../runner/harness/index.ts'
import { findInstalled, type InstalledHarness, installHarness } from '../runner/harness/install.ts'
import { agentSpecSchema } from '../src/contract/rollout.ts'
import { parseArgs, usageError } from './lib/cli-args.ts'
import { REPO_ROOT, startEdge } from './lib/processes.ts'

/** Variants whose bodies repeat another variant's (only their probe traffic differs): run and report, no fixtures. */
const PROBE_ONLY = new Set(['claude-code-nonessential', 'codex-builtin'])

const SCRIPT_PATH = fileURLToPath(import.meta.url)
const ADMIN_TOKEN = 'record-admin-token'

/** What the harness is asked to do, the engine policy that answers, and how the outcome is judged. */
interface Scenario {
  name: string
  instruction: string
  policy: 'scripted' | 'solver'
  /** Fill the work dir before the run. */
  prepare(wd: string): void
  /** `solved`: the task's own check passed; `outcome`: what was found (for the report). */
  judge(wd: string): { solved: boolean; outcome: string }
}

const SCENARIOS: Record<string, Scenario> = {
  hello: {
    name: 'hello',
    instruction: 'create hello.txt containing hi',
    policy: 'scripted',
    prepare: () => {},
    judge: (wd) => {
      let text: string | null = null
      try {
        text = readFileSync(join(wd, 'hello.txt'), 'utf8')
      } catch {}
      return {
        solved: text !== null && text.trim() === 'hi',
        outcome: text === null ? 'hello.txt not created' : `hello.txt ${JSON.stringify(text)}`,
      }
    },
  },
  /** The multi-step task fixture (`tasks/fix-stats`), solved by the stand-in's `solver` policy in 11+ calls. */
  'fix-stats': {
    name: 'fix-stats',
    instruction: (JSON.parse(readFileSync(join(REPO_ROOT, 'tasks/fix-stats/task.json'), 'utf8')) as { instruction: string }).instruction,
    policy: 'solver',
    prepare: (wd) => {
      cpSync(join(REPO_ROOT, 'tasks/fix-stats/repo'), wd, { recursive: true })
      const git = spawnSync(
        'sh',
        ['-c', 'git init -q && git add -A && git -c user.name=rollgate -c user.email=rollgate@localhost commit -qm base'],
        { cwd: wd, encoding: 'utf8' },
      )
      if (git.status !== 0) throw new Error(`git init in ${wd}: ${git.stderr}`)
    },
    judge: (wd) => {
      const pytest = spawnSync('python3', ['-m', 'pytest', '-q', '-p', 'no:cacheprovider', 'test_stats.py'], { cwd: wd, encoding: 'utf8' })
      const summary = (pytest.stdout ?? '').trim().split('\n').at(-1) ?? ''
      return { solved: pytest.status === 0, outcome: `pytest: ${summary}` }
    },
  },
}
const API_FOLDERS = ['anthropic', 'openai-chat', 'openai-responses', 'google'] as const
/** Fallback path per API when the tap did not see the body (should not happen). */
const DEFAULT_PATHS: Record<string, string> = {
  anthropic: '/v1/messages',
  'openai-chat': '/v1/chat/completions',
  'openai-responses': '/v1/responses',
  google: '/v1beta/models/gemini:generateContent',
}
/** Placeholders for the run's absolute paths. */
const WD_PLACEHOLDER = '/workspace/project'
const HOME_PLACEHOLDER = '/home/agent'
const RUN_PLACEHOLDER = '/workspace'
const MAX_FAILURE_FILES = 20

interface Options {
  inside: boolean
  only: string[] | null
  timeoutMs: number
  runsDir: string
  write: boolean
  maxModelLen: number
  verbose: boolean
  scenario: Scenario
}

const ARGS = {
  options: {
    only: { type: 'string' },
    scenario: { type: 'string', default: 'hello' },
    'timeout-s': { type: 'string', default: '120' },
    'runs-dir': { type: 'string', default: '/var/tmp/rollgate-harness-runs' },
    'no-write': { type: 'boolean', default: false },
    'max-model-len': { type: 'string', default: '262144' },
    verbose: { type: 'boolean', default: false },
    /** Internal: set by the re-execution inside the loopback-only network namespace. */
    inside: { type: 'boolean', default: false },
  },
} as const

const ABOUT = `Records each harness CLI's requests through the real edge as adapter fixtures (the module header has the details).
--only        variants or harnesses, comma-separated (default: every one)
--scenario    ${Object.keys(SCENARIOS).join(' | ')}
--no-write    run and report, write no fixtures
--inside      internal (the re-execution inside the loopback-only network namespace)`

function positiveNumber(name: string, value: string): number {
  const number = Number(value)
  if (!(Number.isFinite(number) && number > 0)) usageError(ARGS, `--${name} must be a positive number, got "${value}"`)
  return number
}

function parseOptions(argv: string[]): Options {
  const { values } = parseArgs({ ...ARGS, args: argv }, ABOUT)
  const scenario = SCENARIOS[values.scenario]
  if (!scenario) usageError(ARGS, `--scenario: unknown scenario ${values.scenario} (known: ${Object.keys(SCENARIOS).join(', ')})`)
  return {
    inside: values.inside,
    only: values.only === undefined ? null : values.only.split(',').filter(Boolean),
    timeoutMs: positiveNumber('timeout-s', values['timeout-s']) * 1000,
    runsDir: values['runs-dir'],
    write: !values['no-write'],
    maxModelLen: positiveNumber('max-model-len', values['max-model-len']),
    verbose: values.verbose,
    scenario,
  }
}

// ---------------------------------------------------------------------------------------------------------
// Outside: install, then re-execute inside a loopback-only network namespace.

interface SelectedVariant {
  harness: Harness
  variant: HarnessVariant
}

function selectVariants(only: string[] | null): SelectedVariant[] {
  const all = cliVariants()
  const matches = (entry: SelectedVariant, name: string) =>
    entry.variant.id === name || entry.harness.name === name || entry.harness.name.replaceAll('_', '-') === name
  const selected = only ? all.filter((entry) => only.some((name) => matches(entry, name))) : all
  if (selected.length === 0)
    throw new Error(`no variant matches --only ${only?.join(',')}; known: ${all.map((entry) => entry.variant.id).join(', ')}`)
  return selected
}

/** The pinned CLIs of the selected variants, each once. */
function packagesOf(selected: SelectedVariant[]) {
  return [...new Map(selected.map(({ harness }) => [harness.pkg!.name, harness.pkg!])).values()]
}

async function ensureInstalled(selected: SelectedVariant[]) {
  for (const pkg of packagesOf(selected)) await installHarness(pkg)
}

async function reexecInside(options: Options, argv: string[]): Promise<number> {
  await ensureInstalled(selectVariants(options.only))
  const unshare = process.getuid?.() === 0 ? ['-n'] : ['--user', '--map-root-user', '-n']
  const inner = 'ip link set lo up && exec "$0" "$@"'
  const result = spawnSync('unshare', [...unshare, '--', 'sh', '-c', inner, process.execPath, SCRIPT_PATH, '--inside', ...argv], {
    stdio: 'inherit',
    cwd: REPO_ROOT,
  })
  if (result.error) throw result.error
  return result.status ?? 1
}

// ---------------------------------------------------------------------------------------------------------
// Inside: the tap in front of the edge.

interface TapEntry {
  method: string
  path: string
  headers: IncomingHttpHeaders
  body: string
  status: number | null
  contentType: string | null
  /** The answer's text (first 256 KiB), for error reports. */
  answer: string
  error: string | null
  /** The harness hung up before the edge finished (Codex drops the stream at `response.completed`). */
  clientClosed: boolean
}

interface Tap {
  url: string
  entries: TapEntry[]
  close(): Promise<void>
}

/** The answer as text, decompressed when the edge compressed it (harnesses ask for gzip / br). */
function decodeAnswer(raw: Buffer, encoding: string): string {
  try {
    if (encoding === 'gzip') return gunzipSync(raw).toString('utf8')
    if (encoding === 'br') return brotliDecompressSync(raw).toString('utf8')
    if (encoding === 'deflate') return inflateSync(raw).toString('utf8')
  } catch {
    // truncated at 256 KiB or not compressed after all
  }
  return raw.toString('utf8')
}

function startTap(edgeUrl: string): Promise<Tap> {
  const target = new URL(edgeUrl)
  const entries: TapEntry[] = []
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => {
      const body = Buffer.concat(chunks)
      const entry: TapEntry = {
        method: req.method ?? 'GET',
        path: req.url ?? '/',
        headers: req.headers,
        body: body.toString('utf8'),
        status: null,
        contentType: null,
        answer: '',
        error: null,
        clientClosed: false,
      }
      entries.push(entry)
      const headers = { ...req.headers, host: target.host }
      const upstream = httpRequest({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers }, (answer) => {
        entry.status = answer.statusCode ?? 0
        entry.contentType = String(answer.headers['content-type'] ?? '') || null
        res.writeHead(answer.statusCode ?? 502, answer.rawHeaders)
        const chunks: Buffer[] = []
        let size = 0
        answer.on('data', (chunk: Buffer) => {
          if (size < 262_144) chunks.push(chunk)
          size += chunk.length
          res.write(chunk)
        })
        answer.on('end', () => {
          entry.answer = decodeAnswer(Buffer.concat(chunks), String(answer.headers['content-encoding'] ?? ''))
          res.end()
        })
        answer.on('error', (error) => {
          entry.error = String(error)
          res.destroy()
        })
      })
      upstream.on('error', (error) => {
        entry.error = String(error)
        if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' })
        res.end(`tap: ${error}`)
      })
      res.on('close', () => {
        if (res.writableFinished) return
        entry.clientClosed = true
        upstream.destroy()
      })
      upstream.end(body)
    })
  })
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const port = (server.address() as AddressInfo).port
      resolve({
        url: `http://127.0.0.1:${port}`,
        entries,
        close: () =>
          new Promise<void>((done) => {
            server.closeAllConnections()
            server.close(() => done())
          }),
      })
    })
  })
}

function writeJson(path: string, value: unknown) {
  mkdirSync(dirname(path), { recursive: true })
  writeFileSync(path, `${JSON.stringify(value, null, 2)}\n`)
}

// ---------------------------------------------------------------------------------------------------------
// Scrubbing.

/** UUIDs, also glued to a prefix (`msg_<uuid>`, Codex's UUIDv7 item ids). */
const UUID_RE = /(?<![0-9a-f-])[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}(?![0-9a-f-])/gi
const HEX64_RE = /(?<![0-9a-f])[0-9a-f]{64}(?![0-9a-f])/gi
/** opencode's ids: `ses_` / `msg_` / `prt_` + 12 hex (time) + 14 base62. */
const OPENCODE_ID_RE = /\b(ses|msg|prt)_[0-9a-f]{12}[0-9A-Za-z]{14}\b/g
/** Error frames in a synthetic stream (Anthropic / Responses `event: error`, `response.failed`, chat / Gemini `data: {"error"`). */
const STREAM_ERROR_RE = /^(?:event: (?:error|response\.failed)\b|data: \{"error":)/m
const KEY_RE = /\b(?:sk|rg)[-_][A-Za-z0-9][A-Za-z0-9._-]{7,}/g

export type Scrub = (text: string) => string

/**
 * Text scrubber for one run: secrets and key-like strings out, the run's absolute paths (also in the
 * `-var-tmp-…` form harnesses use for per-project folders) to placeholders, volatile ids to stable
 * placeholders numbered by first appearance, so turn 2 still repeats turn 1's ids.
 */
export function makeScrubber(secrets: { token: string; paths: [string, string][] }): Scrub {
  const ids = new Map<string, string>()
  const stable = (match: string, make: (n: number) => string) => {
    const key = match.toLowerCase()
    let placeholder = ids.get(key)
    if (!placeholder) {
      placeholder = make(ids.size + 1)
      ids.set(key, placeholder)
    }
    return placeholder
  }
  const paths = secrets.paths.flatMap(([from, to]): [string, string][] => [
    [from, to],
    [from.replaceAll('/', '-'), to.replaceAll('/', '-')],
  ])
  return (text) => {
    let out = text.split(secrets.token).join('<SESSION_TOKEN>')
    for (const [from, to] of paths) out = out.split(from).join(to)
    out = out.replace(KEY_RE, '<API_KEY>')
    out = out.replace(UUID_RE, (match) => stable(match, (n) => `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`))
    out = out.replace(HEX64_RE, '0'.repeat(64))
    out = out.replace(OPENCODE_ID_RE, (match, prefix: string) => stable(match, (n) => `${prefix}_${String(n).padStart(26, '0')}`))
    // Claude Code's per-request billing header: `cc_version=2.1.330.<nonce>; … cch=<hash>;`.
    out = out.replace(/(cc_version=\d+\.\d+\.\d+)\.[0-9A-Za-z]+/g, '$1.000')
    out = out.replace(/\bcch=[0-9A-Za-z]+/g, 'cch=00000')
    return out
  }
}

/** JSON value through the text scrubber (placeholders contain no JSON metacharacters). */
function scrubJson<T>(value: T, scrub: Scrub): T {
  return JSON.parse(scrub(JSON.stringify(value))) as T
}

const DROP_HEADERS = new Set(['host', 'content-length', 'connection', 'accept-encoding', 'transfer-encoding', 'keep-alive'])
const AUTH_HEADERS: Record<string, string> = {
  authorization: 'Bearer <SESSION_TOKEN>',
  'x-api-key': '<SESSION_TOKEN>',
  'x-goog-api-key': '<SESSION_TOKEN>',
}

function fixtureHeaders(headers: IncomingHttpHeaders, scrub: Scrub): Record<string, string> {
  const out: Record<string, string> = {}
  for (const name of Object.keys(headers).sort()) {
    if (DROP_HEADERS.has(name)) continue
    const raw = headers[name]
    const value = Array.isArray(raw) ? raw.join(', ') : (raw ?? '')
    out[name] = AUTH_HEADERS[name] ?? scrub(value)
  }
  return out
}

function scrubPath(path: string, token: string): string {
  const url = new URL(path, 'http://edge.test')
  if (url.searchParams.has('key')) url.searchParams.set('key', '<SESSION_TOKEN>')
  return `${url.pathname.split(token).join('<SESSION_TOKEN>')}${url.search}`
}

// ---------------------------------------------------------------------------------------------------------
// One run.

interface CompletionRecord {
  seq: number
  api: string
  status: string
  trainable: boolean
  stream: boolean
  model_requested: string
  error: string | null
  original_request: unknown
  prompt_token_ids: number[]
  response_token_ids: number[]
}

interface RunResult {
  variant: string
  harness: string
  exitCode: number | null
  signal: string | null
  timedOut: boolean
  seconds: number
  calls: string[]
  completions: number
  apis: string[]
  recordStatuses: string[]
  /** Per call after the first: does its prompt start with the previous call's prompt + sampled ids? */
  continuity: string[]
  solved: boolean
  outcome: string
  edgeErrors: string[]
  fixtures: string[]
  stderrTail: string
  stdoutTail: string
}

/** The minimal process env under the harness module's own (HOME, keys and switches come from the module). */
function baseEnv(): Record<string, string> {
  return {
    PATH: `${dirname(process.execPath)}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin`,
    LANG: 'C.UTF-8',
    USER: 'root',
    SHELL: '/bin/bash',
  }
}

/** Token continuity between consecutive calls (side calls such as titles start a new conversation). */
function continuity(previous: CompletionRecord, next: CompletionRecord): string {
  const full = [...previous.prompt_token_ids, ...previous.response_token_ids]
  let shared = 0
  while (shared < full.length && shared < next.prompt_token_ids.length && full[shared] === next.prompt_token_ids[shared]) shared++
  if (shared === full.length) return 'extends'
  if (shared >= previous.prompt_token_ids.length) return `sampled ids differ at +${shared - previous.prompt_token_ids.length}`
  return `new conversation (${shared} shared)`
}

function tail(path: string, chars = 1500): string {
  try {
    const text = readFileSync(path, 'utf8')
    return text.length > chars ? `…${text.slice(-chars)}` : text
  } catch {
    return ''
  }
}

/** One rendered step under `bash -c`, output to `<logDir>/<name>.{stdout,stderr}.log`. */
function runStep(step: HarnessStep, cwd: string, env: Record<string, string>, logDir: string, timeoutMs: number) {
  mkdirSync(logDir, { recursive: true })
  const out = openSync(join(logDir, `${step.name}.stdout.log`), 'w')
  const err = openSync(join(logDir, `${step.name}.stderr.log`), 'w')
  const started = Date.now()
  const child: ChildProcess = spawn('bash', ['-c', step.command], {
    cwd: step.cwd ?? cwd,
    env: { ...env, ...step.env },
    stdio: ['ignore', out, err],
    detached: true,
  })
  closeSync(out)
  closeSync(err)
  const killGroup = (signal: NodeJS.Signals) => {
    if (child.pid === undefined) return
    try {
      process.kill(-child.pid, signal)
    } catch {
      // already gone
    }
  }
  return new Promise<{ exitCode: number | null; signal: string | null; timedOut: boolean; seconds: number }>((resolve) => {
    let timedOut = false
    const timer = setTimeout(() => {
      timedOut = true
      killGroup('SIGTERM')
      setTimeout(() => killGroup('SIGKILL'), 3_000).unref()
    }, timeoutMs)
    const finish = (exitCode: number | null, signal: string | null) => {
      clearTimeout(timer)
      // Leftover helpers in the harness's process group (servers, shells) go too.
      killGroup('SIGKILL')
      resolve({ exitCode, signal, timedOut, seconds: Math.round((Date.now() - started) / 100) / 10 })
    }
    child.once('error', (error) => {
      writeFileSync(join(logDir, `${step.name}.spawn-error.txt`), String(error))
      finish(null, null)
    })
    child.once('exit', (code, signal) => finish(code, signal))
  })
}

async function runVariant(
  { harness, variant }: SelectedVariant,
  cli: InstalledHarness,
  options: Options,
  edgeUrl: string,
  tap: Tap,
  fixtureRoot: string,
): Promise<RunResult> {
  const runDir = join(options.runsDir, variant.id)
  rmSync(runDir, { recursive: true, force: true })
  const home = join(runDir, 'home')
  const wd = join(runDir, 'wd')
  const logDir = join(runDir, 'logs/agent')
  mkdirSync(home, { recursive: true })
  mkdirSync(wd, { recursive: true })
  options.scenario.prepare(wd)

  const admin = (path: string, init: RequestInit = {}) =>
    fetch(`${edgeUrl}${path}`, { ...init, headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' } })
  const created = await admin('/v1/sessions', {
    method: 'POST',
    body: JSON.stringify({ task_id: `harness-${variant.id}`, metadata: { harness: harness.name, variant: variant.id } }),
  })
  if (created.status !== 201) throw new Error(`create session: ${created.status} ${await created.text()}`)
  const session = (await created.json()) as { session_id: string; token: string }

  const plan = harness.render({
    instruction: options.scenario.instruction,
    edgeUrl: tap.url,
    token: session.token,
    agent: agentSpecSchema.parse({ harness: harness.name }),
    variant: variant.id,
    cliPath: cli.bin,
    sessionDir: runDir,
    homeDir: home,
    workDir: wd,
  })
  for (const file of plan.files) {
    mkdirSync(dirname(file.path), { recursive: true })
    writeFileSync(file.path, file.content, { mode: file.mode })
  }
  const env = { ...baseEnv(), ...plan.env }
  const scrub = makeScrubber({
    token: session.token,
    paths: [
      [wd, WD_PLACEHOLDER],
      [home, HOME_PLACEHOLDER],
      [runDir, RUN_PLACEHOLDER],
      [options.runsDir, RUN_PLACEHOLDER],
      [join(cli.root, 'node_modules'), '/usr/local/lib/node_modules'],
      [tap.url, 'http://127.0.0.1:8787'],
    ],
  })

  const firstEntry = tap.entries.length
  const started = Date.now()
  let run = { exitCode: 0 as number | null, signal: null as string | null, timedOut: false, seconds: 0 }
  for (const step of plan.steps) {
    run = await runStep(step, wd, env, logDir, Math.max(1, options.timeoutMs - (Date.now() - started)))
    if (run.exitCode !== 0) break
  }
  run.seconds = Math.round((Date.now() - started) / 100) / 10
  for (const step of plan.postrunSteps) await runStep(step, wd, env, logDir, 30_000)
  await new Promise((resolve) => setTimeout(resolve, 300))
  const entries = tap.entries.slice(firstEntry)
  const mainStep = plan.steps.at(-1)?.name ?? 'agent'

  const { solved, outcome } = options.scenario.judge(wd)

  const records: CompletionRecord[] = []
  for (let after: number | null = -1; after !== null; ) {
    const listed = await admin(`/v1/sessions/${session.session_id}/completions?after_seq=${after}`)
    if (!listed.ok) throw new Error(`completions after ${after}: ${listed.status} ${await listed.text()}`)
    const page = (await listed.json()) as { completions: CompletionRecord[]; next_after_seq: number | null }
    records.push(...page.completions)
    after = page.next_after_seq
  }

  writeJson(join(runDir, 'completions.json'), scrubJson(records, scrub))

  // Fixtures: body from the record, path and headers from the tap entry that carried the same body.
  const fixtures: string[] = []
  const used = new Set<number>()
  const planned: { folder: string; file: string; data: unknown }[] = []
  records.forEach((record, index) => {
    let match: TapEntry | undefined
    entries.forEach((entry, entryIndex) => {
      if (match || used.has(entryIndex) || entry.method !== 'POST') return
      let parsed: unknown
      try {
        parsed = JSON.parse(entry.body)
      } catch {
        return
      }
      if (isDeepStrictEqual(parsed, record.original_request)) {
        match = entry
        used.add(entryIndex)
      }
    })
    const path = match ? scrubPath(match.path, session.token) : (DEFAULT_PATHS[record.api] ?? '/')
    const headers = match ? fixtureHeaders(match.headers, scrub) : {}
    const body = scrubJson(record.original_request, scrub)
    planned.push({
      folder: record.api,
      file: `${variant.id}-${options.scenario.name}.${index + 1}.request.json`,
      data: { path, headers, body },
    })
  })
  if (options.write && !PROBE_ONLY.has(variant.id) && planned.length > 0) {
    const stale = new RegExp(`^${variant.id.replace(/[-]/g, '\\-')}-${options.scenario.name}\\.\\d+\\.request\\.json$`)
    for (const folder of API_FOLDERS) {
      const dir = join(fixtureRoot, folder, '__fixtures__')
      if (!existsSync(dir)) continue
      for (const file of readdirSync(dir)) if (stale.test(file)) rmSync(join(dir, file))
    }
    for (const { folder, file, data } of planned) {
      const dir = join(fixtureRoot, folder, '__fixtures__')
      mkdirSync(dir, { recursive: true })
      writeFileSync(join(dir, file), `${JSON.stringify(data, null, 1)}\n`)
      fixtures.push(`src/normalize/providers/${folder}/__fixtures__/${file}`)
    }
  }

  // Edge answers ≥ 400, and 2xx streams that carry an error event: keep the (scrubbed) request for reproduction.
  const edgeErrors: string[] = []
  const failureDir = join(runDir, 'failures')
  entries.forEach((entry, index) => {
    const streamError = entry.status !== null && entry.status < 400 && STREAM_ERROR_RE.test(entry.answer)
    // 426 to a WebSocket upgrade is the intended answer (Codex then uses HTTP POST).
    const expected = entry.status === 426 && String(entry.headers.upgrade ?? '').toLowerCase() === 'websocket'
    const failed = entry.error !== null && !entry.clientClosed
    if (!failed && (expected || (entry.status !== null && entry.status < 400 && !streamError))) return
    const answer = scrub(entry.answer)
    // Keep the first few for reproduction; a harness stuck retrying would otherwise write thousands.
    const file = edgeErrors.length < MAX_FAILURE_FILES ? join(failureDir, `${index}.json`) : 'not kept'
    if (edgeErrors.length < MAX_FAILURE_FILES) {
      let body: unknown = entry.body
      try {
        body = JSON.parse(entry.body)
      } catch {}
      mkdirSync(failureDir, { recursive: true })
      writeJson(file, {
        method: entry.method,
        path: scrubPath(entry.path, session.token),
        headers: fixtureHeaders(entry.headers, scrub),
        body: typeof body === 'string' ? scrub(body) : scrubJson(body, scrub),
        status: entry.status,
        answer,
        error: entry.error,
      })
    }
    const shown = (streamError ? answer.slice(answer.search(STREAM_ERROR_RE)) : answer).replace(/\s+/g, ' ')
    edgeErrors.push(
      `${entry.method} ${scrubPath(entry.path, session.token)} → ${entry.status ?? 'no answer'}${streamError ? ' (error inside the stream)' : ''} ${shown.slice(0, 400)}${entry.error ? ` (${entry.error})` : ''} [${file}]`,
    )
  })

  return {
    variant: variant.id,
    harness: harness.name,
    exitCode: run.exitCode,
    signal: run.signal,
    timedOut: run.timedOut,
    seconds: run.seconds,
    calls: entries.map(
      (entry) =>
        `${entry.method} ${scrubPath(entry.path, session.token)} ${entry.status ?? '-'}${entry.clientClosed ? ' (harness hung up first)' : ''}`,
    ),
    completions: records.length,
    apis: [...new Set(records.map((record) => record.api))],
    continuity: records.slice(1).map((record, index) => `${index + 1}→${index + 2} ${continuity(records[index]!, record)}`),
    recordStatuses: records.map(
      (record) => `${record.status}${record.trainable ? '' : '(untrainable)'}${record.error ? `: ${record.error}` : ''}`,
    ),
    solved,
    outcome,
    edgeErrors,
    fixtures,
    stderrTail: scrub(tail(join(logDir, `${mainStep}.stderr.log`))),
    stdoutTail: scrub(tail(join(logDir, `${mainStep}.stdout.log`), 600)),
  }
}

async function inside(options: Options): Promise<number> {
  const interfaces = Object.keys(networkInterfaces())
  if (interfaces.some((name) => name !== 'lo'))
    throw new Error(`refusing to run outside a loopback-only namespace (interfaces: ${interfaces.join(', ')})`)
  const variants = selectVariants(options.only)
  const clis = new Map<string, InstalledHarness>()
  for (const pkg of packagesOf(variants)) {
    const found = findInstalled(pkg)
    if (!found) throw new Error(`${pkg.name}@${pkg.version} is not installed (the outside step installs it)`)
    clis.set(pkg.name, found)
  }
  mkdirSync(options.runsDir, { recursive: true })

  const engine = await startEngine({ port: 0, seed: 7, maxModelLen: options.maxModelLen, policy: options.scenario.policy })
  const persistTo = mkdtempSync(join(tmpdir(), 'rollgate-harness-state-'))
  const edge = await startEdge({
    persistTo,
    verbose: options.verbose,
    vars: {
      ROLLGATE_ADMIN_TOKEN: ADMIN_TOKEN,
      ROLLGATE_SIGNING_KEY: 'record-signing-key',
      ROLLGATE_UPSTREAM_URL: engine.url,
      ROLLGATE_HEARTBEAT_MS: '1000',
    },
  })
  const tap = await startTap(edge.url)
  console.log(`engine ${engine.url}  edge ${edge.url}  tap ${tap.url}  runs ${options.runsDir}\n`)
  const fixtureRoot = join(REPO_ROOT, 'src/normalize/providers')
  const results: RunResult[] = []
  try {
    for (const selected of variants) {
      process.stdout.write(`── ${selected.variant.id} … `)
      try {
        const result = await runVariant(selected, clis.get(selected.harness.pkg!.name)!, options, edge.url, tap, fixtureRoot)
        results.push(result)
        printResult(result)
      } catch (error) {
        console.log(`harness run failed: ${(error as Error).stack ?? error}`)
      }
    }
  } finally {
    await tap.close()
    await edge.stop()
    await engine.close()
    rmSync(persistTo, { recursive: true, force: true })
  }
  console.log('\nsummary')
  for (const r of results) {
    console.log(
      `  ${r.variant.padEnd(19)} exit=${String(r.exitCode ?? r.signal).padEnd(4)}${r.timedOut ? ' (timeout)' : ''} calls=${r.calls.length} completions=${r.completions} apis=${r.apis.join('+') || '-'} solved=${r.solved ? '✓' : `✗ (${r.outcome})`} edge≥400=${r.edgeErrors.length} fixtures=${r.fixtures.length}`,
    )
  }
  writeJson(join(options.runsDir, 'summary.json'), results)
  console.log(
    JSON.stringify({
      variants: results.length,
      scenario: options.scenario.name,
      solved: results.filter((r) => r.solved).map((r) => r.variant),
      edge_errors: results.reduce((n, r) => n + r.edgeErrors.length, 0),
    }),
  )
  return 0
}

/** A list as is when short, else its distinct entries with counts (a harness stuck retrying makes thousands). */
function brief(items: string[], separator: string, max = 12): string {
  if (items.length <= max) return items.join(separator)
  const counts = new Map<string, number>()
  for (const item of items) counts.set(item, (counts.get(item) ?? 0) + 1)
  return [...counts].map(([item, count]) => `${count}× ${item}`).join(separator)
}

function printResult(r: RunResult) {
  console.log(`exit ${r.exitCode ?? r.signal}${r.timedOut ? ' (timed out)' : ''} in ${r.seconds} s`)
  console.log(`   calls: ${brief(r.calls, ' | ') || 'none'}`)
  console.log(`   captured: ${r.completions} (${r.apis.join(', ') || 'no API'}) ${brief(r.recordStatuses, '; ')}`)
  if (r.continuity.length > 0)
    console.log(
      `   token continuity: ${brief(
        r.continuity.map((c) => c.replace(/^\d+→\d+ /, r.continuity.length > 12 ? '' : '$&')),
        ', ',
      )}`,
    )
  console.log(`   outcome: ${r.solved ? 'solved' : 'NOT solved'}, ${r.outcome}`)
  for (const error of r.edgeErrors.slice(0, 3)) console.log(`   edge error: ${error}`)
  if (r.edgeErrors.length > 3) console.log(`   … ${r.edgeErrors.length - 3} more edge errors (see the run's failures/ folder)`)
  for (const file of r.fixtures) console.log(`   fixture: ${file}`)
  if (!r.solved || r.exitCode !== 0) {
    console.log(`   stdout: ${r.stdoutTail.trim().replace(/\n/g, '\n           ')}`)
    console.log(`   stderr: ${r.stderrTail.trim().replace(/\n/g, '\n           ')}`)
  }
}

const options = parseOptions(process.argv.slice(2))
if (options.inside) process.exitCode = await inside(options)
else process.exitCode = await reexecInside(options, process.argv.slice(2))
