// Rollgate operator dashboard: a small client over the edge's admin API. No framework; every value is
// inserted as text (never as HTML), since captured requests are untrusted. The admin token typed into
// the login form lives only in this tab's sessionStorage and goes out as a bearer header.

const TOKEN_KEY = 'rollgate.admin'
const PAGE = 50
const TRACES_PER_PAGE = 5
const EXPORT_FORMATS = ['trajectory', 'session_result', 'nemo-gym', 'sft', 'sft-tokens']
const main = document.getElementById('main')

// --- DOM helpers -------------------------------------------------------------------------------

function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag)
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue
    if (key.startsWith('on')) node.addEventListener(key.slice(2), value)
    else if (key === 'dataset') Object.assign(node.dataset, value)
    else node.setAttribute(key, value === true ? '' : String(value))
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue
    node.append(child instanceof Node ? child : document.createTextNode(String(child)))
  }
  return node
}

const status = (value) => h('span', { class: `status ${value}` }, value)
const link = (href, text) => h('a', { href }, text)
const fmt = (value, digits = 3) => (value === null || value === undefined || Number.isNaN(value) ? '—' : Number(value).toFixed(digits))
const card = (label, value) => h('div', { class: 'card' }, h('div', { class: 'value' }, value), h('div', { class: 'label' }, label))

function render(...nodes) {
  main.replaceChildren(...nodes.filter((node) => node !== null && node !== undefined && node !== false))
}

/**
 * One page's lifetime. Pages load asynchronously and keep streams, timers and debounced redraws going; once
 * another page replaces this one (`enterPage`), everything it started stops and nothing it finishes later
 * reaches the screen (a late answer must never paint the previous page over the current one).
 */
function newScope() {
  const scope = {
    live: true,
    stops: [],
    render: (...nodes) => {
      if (scope.live) render(...nodes)
    },
    error: (error) => {
      if (scope.live) showError(error)
    },
    end: () => {
      scope.live = false
      for (const stop of scope.stops.splice(0)) stop()
    },
  }
  return scope
}

let current = newScope()

function enterPage() {
  current.end()
  current = newScope()
  return current
}

function mean(values) {
  return values.length ? values.reduce((a, b) => a + b, 0) / values.length : null
}

function std(values) {
  const m = mean(values)
  return values.length ? Math.sqrt(values.reduce((a, b) => a + (b - m) ** 2, 0) / values.length) : null
}

/** GRPO leave-one-out advantage: reward minus the mean of the group's other rewards (missing reward = 0). */
export function leaveOneOut(rewards) {
  const values = rewards.map((value) => value ?? 0)
  const total = values.reduce((a, b) => a + b, 0)
  return values.map((value) => (values.length > 1 ? value - (total - value) / (values.length - 1) : 0))
}

// --- API -----------------------------------------------------------------------------------------

class Unauthorized extends Error {}

async function api(path, init = {}) {
  const token = sessionStorage.getItem(TOKEN_KEY)
  const response = await fetch(path, {
    ...init,
    headers: { authorization: `Bearer ${token}`, ...(init.body ? { 'content-type': 'application/json' } : {}), ...(init.headers ?? {}) },
  })
  if (response.status === 401) throw new Unauthorized('the edge refused the admin token')
  return response
}

async function json(path, init) {
  const response = await api(path, init)
  const body = await response.json().catch(() => null)
  if (!response.ok) {
    const error = new Error(body?.error?.message ?? `${response.status} ${response.statusText}`)
    error.status = response.status
    throw error
  }
  return body
}

/**
 * Server-sent events over fetch (EventSource cannot send a bearer header); reconnects with Last-Event-ID.
 * Resolves once the edge has confirmed the subscription (its `hello` frame) or the first attempt failed:
 * a page subscribes first and reads its snapshot after, so no change between the two is missed. A
 * reconnect that has no event id to resume from calls `onResync` (the page reloads its snapshot).
 */
function subscribe(scope, query, onEvent, onResync) {
  const controller = new AbortController()
  scope.stops.push(() => controller.abort())
  let lastId = null
  let opened = false
  let markOpen
  const ready = new Promise((resolve) => {
    markOpen = () => {
      opened = true
      resolve()
    }
  })
  const loop = async () => {
    while (!controller.signal.aborted) {
      try {
        const response = await api(`/v1/events${query}`, {
          signal: controller.signal,
          headers: lastId ? { 'last-event-id': lastId } : {},
        })
        if (!response.ok || !response.body) throw new Error(`events: ${response.status}`)
        const reader = response.body.pipeThrough(new TextDecoderStream()).getReader()
        let buffer = ''
        for (;;) {
          const { value, done } = await reader.read()
          if (done) break
          buffer += value
          let end = buffer.indexOf('\n\n')
          while (end >= 0) {
            const frame = buffer.slice(0, end)
            buffer = buffer.slice(end + 2)
            let data = ''
            let type = 'message'
            for (const line of frame.split('\n')) {
              if (line.startsWith('id:')) lastId = line.slice(3).trim()
              else if (line.startsWith('event:')) type = line.slice(6).trim()
              else if (line.startsWith('data:')) data += line.slice(5).trim()
            }
            if (type === 'hello') {
              if (!opened) markOpen()
              else if (lastId === null && scope.live) onResync?.()
            } else if (data && scope.live) {
              try {
                onEvent(JSON.parse(data))
              } catch {}
            }
            end = buffer.indexOf('\n\n')
          }
        }
      } catch (error) {
        if (controller.signal.aborted || error instanceof Unauthorized) return markOpen()
      }
      // A failed first attempt does not hold the page back (it stays live by retrying).
      if (!opened) markOpen()
      await new Promise((resolve) => setTimeout(resolve, 1000))
    }
  }
  loop()
  return ready
}

function every(scope, ms, fn) {
  let running = false
  const timer = setInterval(async () => {
    if (running) return // the previous round is still out: never two overlapping draws
    running = true
    try {
      await fn()
    } finally {
      running = false
    }
  }, ms)
  scope.stops.push(() => clearInterval(timer))
}

/**
 * Debounced, per key, latest-wins reloads: `load(key)` runs 250 ms after the last request for that key, and
 * `apply(key, value)` only for the newest load of that key (an older answer arriving late is dropped).
 */
function reloader(scope, load, apply, ms = 250) {
  const timers = new Map()
  const newest = new Map()
  scope.stops.push(() => {
    for (const timer of timers.values()) clearTimeout(timer)
  })
  return (key) => {
    clearTimeout(timers.get(key))
    timers.set(
      key,
      setTimeout(async () => {
        const ticket = (newest.get(key) ?? 0) + 1
        newest.set(key, ticket)
        try {
          const value = await load(key)
          if (scope.live && newest.get(key) === ticket) apply(key, value)
        } catch (error) {
          scope.error(error)
        }
      }, ms),
    )
  }
}

async function download(sessionId, format, builder) {
  const response = await api(`/v1/sessions/${encodeURIComponent(sessionId)}/trajectory?builder=${builder}&format=${format}`)
  if (!response.ok) throw new Error(`${format}: ${response.status}`)
  const blob = await response.blob()
  const url = URL.createObjectURL(blob)
  const extension = format === 'trajectory' || format === 'session_result' ? 'json' : 'jsonl'
  const anchor = h('a', { href: url, download: `${sessionId}.${builder}.${format}.${extension}` })
  document.body.append(anchor)
  anchor.click()
  anchor.remove()
  setTimeout(() => URL.revokeObjectURL(url), 10_000)
}

function downloads(sessionId, builder) {
  return h(
    'div',
    { class: 'pager', id: 'downloads' },
    h('span', { class: 'muted' }, `Download (${builder}):`),
    EXPORT_FORMATS.map((format) =>
      h('button', { type: 'button', dataset: { format }, onclick: () => download(sessionId, format, builder).catch(showError) }, format),
    ),
  )
}

function showError(error) {
  if (error instanceof Unauthorized) return logout(error.message)
  main.prepend(h('p', { class: 'error', role: 'alert' }, error.message))
}

// --- pages -----------------------------------------------------------------------------------------

function loginPage(message) {
  enterPage()
  document.getElementById('nav').hidden = true
  const input = h('input', { type: 'password', name: 'token', autocomplete: 'off', placeholder: 'ROLLGATE_ADMIN_TOKEN', required: true })
  const form = h(
    'form',
    { class: 'login', id: 'login' },
    h('h1', {}, 'Rollgate'),
    h('p', { class: 'muted' }, 'Admin token (kept only in this browser tab).'),
    message ? h('p', { class: 'error', role: 'alert' }, message) : null,
    input,
    h('button', { type: 'submit' }, 'Log in'),
  )
  form.addEventListener('submit', async (event) => {
    event.preventDefault()
    sessionStorage.setItem(TOKEN_KEY, input.value)
    try {
      await json('/rollout/status')
      navigate(location.pathname === '/dashboard/login' ? '/dashboard' : location.pathname + location.search)
    } catch (error) {
      sessionStorage.removeItem(TOKEN_KEY)
      loginPage(error instanceof Unauthorized ? 'Token refused by the edge.' : error.message)
    }
  })
  render(form)
  input.focus()
}

function logout(message) {
  sessionStorage.removeItem(TOKEN_KEY)
  loginPage(message)
}

async function taskRow(taskId) {
  const task = await json(`/rollout/task/${encodeURIComponent(taskId)}?results=false`)
  const rewards = task.sessions.map((session) => session.reward).filter((reward) => reward !== null && reward !== undefined)
  return h(
    'tr',
    { dataset: { task: taskId } },
    h('td', {}, link(`/dashboard/task/${encodeURIComponent(taskId)}`, taskId)),
    h('td', {}, status(task.status)),
    h('td', { class: 'num', dataset: { field: 'done' } }, `${task.completed_sessions} / ${task.total_sessions}`),
    h('td', { class: 'num' }, task.usable_sessions),
    h('td', { class: 'num', dataset: { field: 'reward-mean' } }, fmt(mean(rewards))),
    h('td', { class: 'num' }, fmt(std(rewards))),
    h('td', {}, task.callback ? `${task.callback.state} (${task.callback.attempts})` : '—'),
    h('td', { class: 'muted' }, task.submitted_at),
  )
}

async function tasksPage(scope) {
  const body = h('tbody', {})
  let snapshot = null
  const refresh = reloader(
    scope,
    async (taskId) => {
      await snapshot?.catch(() => {})
      return taskRow(taskId)
    },
    (taskId, row) => {
      const existing = body.querySelector(`tr[data-task="${CSS.escape(taskId)}"]`)
      if (existing) existing.replaceWith(row)
      else body.prepend(row)
    },
  )
  // Subscribe first, then read the snapshot: a change in between arrives as an event.
  await subscribe(
    scope,
    '',
    (event) => {
      if (event.task_id) refresh(event.task_id)
    },
    () => route(),
  )
  snapshot = (async () => {
    const overview = await json('/rollout/status')
    const ids = Object.keys(overview.tasks).slice(-100).reverse()
    body.append(...(await Promise.all(ids.map(taskRow))))
    return { overview, ids }
  })()
  const { overview, ids } = await snapshot
  scope.render(
    h('h1', {}, 'Tasks'),
    h(
      'div',
      { class: 'cards' },
      card('tasks', ids.length),
      card('pending sessions', overview.pipeline.pending_sessions),
      card('assigned sessions', overview.pipeline.assigned_sessions),
      card('runners', overview.nodes.nodes.length),
    ),
    ids.length
      ? h(
          'table',
          { id: 'tasks' },
          h(
            'thead',
            {},
            h(
              'tr',
              {},
              ['task', 'status', 'done / total', 'usable', 'reward mean', 'reward spread', 'callback', 'submitted'].map((label) =>
                h('th', {}, label),
              ),
            ),
          ),
          body,
        )
      : h('p', { class: 'muted' }, 'No tasks yet. Submit one with `rollgate submit`.'),
  )
}

async function taskPage(scope, taskId) {
  const load = () => json(`/rollout/task/${encodeURIComponent(taskId)}?results=false`)
  const draw = (task) => {
    const rewards = task.sessions.map((session) => session.reward ?? null)
    const scored = rewards.filter((reward) => reward !== null)
    const advantages = leaveOneOut(rewards)
    scope.render(
      h('h1', {}, `Task ${taskId}`),
      h(
        'div',
        { class: 'cards' },
        card('status', status(task.status)),
        card('done / total', `${task.completed_sessions} / ${task.total_sessions}`),
        card('usable', task.usable_sessions),
        card('reward mean', fmt(mean(scored))),
        card('reward spread (std)', fmt(std(scored))),
        card('callback', task.callback ? `${task.callback.state} (${task.callback.attempts})` : '—'),
      ),
      h(
        'table',
        { id: 'task-sessions' },
        h(
          'thead',
          {},
          h(
            'tr',
            {},
            ['#', 'session', 'status', 'runner', 'reward', 'advantage (leave-one-out)', ''].map((label) => h('th', {}, label)),
          ),
        ),
        h(
          'tbody',
          {},
          task.sessions.map((session, i) =>
            h(
              'tr',
              { dataset: { session: session.session_id } },
              h('td', { class: 'num' }, session.index),
              h('td', {}, link(`/dashboard/session/${encodeURIComponent(session.session_id)}`, session.session_id)),
              h('td', {}, status(session.status)),
              h('td', {}, session.runner_id ?? '—'),
              h('td', { class: 'num' }, fmt(session.reward)),
              h('td', { class: 'num' }, fmt(advantages[i])),
              h('td', {}, link(`/dashboard/trajectory/${encodeURIComponent(session.session_id)}`, 'trajectory')),
            ),
          ),
        ),
      ),
    )
  }
  const redraw = reloader(scope, load, (_, task) => draw(task))
  // Subscribe first, then read the snapshot: a change in between arrives as an event.
  await subscribe(
    scope,
    `?task_id=${encodeURIComponent(taskId)}`,
    () => redraw(taskId),
    () => redraw(taskId),
  )
  draw(await load())
}

async function runnersPage(scope) {
  const samples = []
  const chart = h('div', { id: 'chart' })
  const gateBox = h('div', { class: 'cards', id: 'gate' })
  const table = h('div', { id: 'runners' })
  scope.render(h('h1', {}, 'Runners and pipeline'), gateBox, h('h2', {}, 'Completions per second (RUNNING sessions)'), chart, table)
  const draw = async () => {
    const [overview, gate] = await Promise.all([json('/rollout/status'), json('/admin/inference/status')])
    samples.push({ at: Date.now(), total: gate.completions_total ?? 0 })
    if (samples.length > 61) samples.shift()
    gateBox.replaceChildren(
      card('generation', gate.paused ? 'PAUSED' : 'open'),
      card('policy version', gate.policy_version ?? '—'),
      card('in flight', gate.inflight),
      card('RUNNING sessions', gate.sessions),
      card('pending sessions', overview.pipeline.pending_sessions),
      card('assigned sessions', overview.pipeline.assigned_sessions),
    )
    chart.replaceChildren(rateChart(samples))
    const nodes = overview.nodes.nodes
    table.replaceChildren(
      nodes.length
        ? h(
            'table',
            {},
            h(
              'thead',
              {},
              h(
                'tr',
                {},
                ['runner', 'health', 'INIT', 'READY', 'RUNNING', 'POSTRUN', 'sessions', 'model', 'last heartbeat'].map((label) =>
                  h('th', {}, label),
                ),
              ),
            ),
            h(
              'tbody',
              {},
              nodes.map((node) =>
                h(
                  'tr',
                  { dataset: { runner: node.node_id } },
                  h('td', {}, node.node_id),
                  h('td', {}, status(node.healthy ? 'healthy' : 'unhealthy'), node.draining ? ' draining' : ''),
                  h('td', { class: 'num' }, `${node.metrics.init_inflight}/${node.max_init_workers} (+${node.metrics.init_queue_depth})`),
                  h('td', { class: 'num' }, `${node.metrics.ready_depth}/${node.ready_buffer}`),
                  h('td', { class: 'num' }, `${node.metrics.run_inflight}/${node.max_run_workers}`),
                  h(
                    'td',
                    { class: 'num' },
                    `${node.metrics.postrun_inflight}/${node.max_postrun_workers} (+${node.metrics.postrun_queue_depth})`,
                  ),
                  h('td', { class: 'num' }, node.sessions),
                  h('td', {}, node.upstream ? `${node.upstream.model} (${node.upstream.kind})` : '—'),
                  h('td', { class: 'muted' }, node.last_heartbeat ?? '—'),
                ),
              ),
            ),
          )
        : h('p', { class: 'muted' }, 'No runner connected.'),
    )
  }
  await draw()
  every(scope, 2000, () => draw().catch(scope.error))
}

function rateChart(samples) {
  const width = 600
  const height = 120
  const rates = []
  for (let i = 1; i < samples.length; i++) {
    const seconds = (samples[i].at - samples[i - 1].at) / 1000
    rates.push(seconds > 0 ? Math.max(0, samples[i].total - samples[i - 1].total) / seconds : 0)
  }
  const top = Math.max(1, ...rates)
  const points = rates.map((rate, i) => `${(i / Math.max(1, rates.length - 1)) * width},${height - (rate / top) * (height - 10)}`).join(' ')
  const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg')
  svg.setAttribute('class', 'chart')
  svg.setAttribute('width', width)
  svg.setAttribute('height', height)
  svg.setAttribute('viewBox', `0 0 ${width} ${height}`)
  const line = document.createElementNS('http://www.w3.org/2000/svg', 'polyline')
  line.setAttribute('points', points)
  svg.append(line)
  const label = document.createElementNS('http://www.w3.org/2000/svg', 'text')
  label.setAttribute('x', 8)
  label.setAttribute('y', 16)
  label.setAttribute('fill', '#8b93a3')
  label.textContent = `now ${fmt(rates.at(-1) ?? 0, 1)}/s · peak ${fmt(top, 1)}/s`
  svg.append(label)
  return svg
}

const STAGES = [
  ['registered_at', 'REGISTERED'],
  ['init_at', 'INIT'],
  ['ready_at', 'READY'],
  ['running_at', 'RUNNING'],
  ['postrun_at', 'POSTRUN'],
  ['finished_at', 'DONE'],
]

function timeline(lifecycle) {
  return h(
    'div',
    { class: 'timeline', id: 'timeline' },
    STAGES.map(([key, label], i) => {
      const at = lifecycle.times[key]
      const next = STAGES.slice(i + 1).find(([later]) => lifecycle.times[later])
      const ms = at && next ? lifecycle.times[next[0]] - at : null
      return h(
        'div',
        { class: `step ${at ? 'done' : ''}`, dataset: { stage: label } },
        h('div', {}, label),
        h('div', { class: 'ms' }, at ? new Date(at).toISOString().slice(11, 23) : '—'),
        h('div', { class: 'ms' }, ms === null ? '' : `${ms} ms`),
      )
    }),
  )
}

async function sessionPage(scope, sessionId) {
  const summary = await json(`/v1/sessions/${encodeURIComponent(sessionId)}`)
  let lifecycle = null
  try {
    lifecycle = await json(`/rollout/session/${encodeURIComponent(sessionId)}`)
  } catch (error) {
    if (error instanceof Unauthorized) throw error
  }
  const rows = h('tbody', {})
  const pager = h('div', { class: 'pager' })
  const history = []
  const loadPage = async (afterSeq) => {
    const query = new URLSearchParams({ limit: String(PAGE) })
    if (afterSeq !== null) query.set('after_seq', String(afterSeq))
    const page = await json(`/v1/sessions/${encodeURIComponent(sessionId)}/completions?${query}`)
    rows.replaceChildren(...page.completions.flatMap(completionRows))
    const next = page.completions.length === PAGE ? page.completions.at(-1).seq : (page.next_after_seq ?? null)
    pager.replaceChildren(
      h(
        'button',
        { type: 'button', disabled: history.length === 0, onclick: () => loadPage(history.pop() ?? null).catch(scope.error) },
        '← previous',
      ),
      h(
        'span',
        { class: 'muted' },
        `completions ${page.completions[0]?.seq ?? '—'}–${page.completions.at(-1)?.seq ?? '—'} of ${summary.completion_count}`,
      ),
      h(
        'button',
        {
          type: 'button',
          disabled: next === null || page.completions.length < PAGE,
          onclick: () => {
            history.push(afterSeq)
            loadPage(next).catch(scope.error)
          },
        },
        'next →',
      ),
    )
  }
  scope.render(
    h('h1', {}, `Session ${sessionId}`),
    h(
      'div',
      { class: 'cards' },
      card('completions', summary.completion_count),
      card('task', summary.task_id ?? '—'),
      card('status', lifecycle ? status(lifecycle.status) : 'capture session'),
      card('runner', lifecycle?.runner_id ?? '—'),
      card('finalized', summary.finalized ? (summary.finalized.builder ?? 'yes') : 'no'),
    ),
    lifecycle ? timeline(lifecycle) : null,
    lifecycle?.agent_result
      ? h(
          'p',
          {},
          `Agent: ${lifecycle.agent_result.status} (exit ${lifecycle.agent_result.return_code ?? '—'})${lifecycle.error ? ` — ${lifecycle.error}` : ''}`,
        )
      : null,
    h(
      'p',
      {},
      link(`/dashboard/trajectory/${encodeURIComponent(sessionId)}?builder=prefix_merging`, 'trajectory (prefix_merging)'),
      ' · ',
      link(`/dashboard/trajectory/${encodeURIComponent(sessionId)}?builder=per_request`, 'trajectory (per_request)'),
    ),
    downloads(sessionId, 'prefix_merging'),
    h('h2', {}, 'Completions'),
    pager,
    h(
      'table',
      { id: 'completions' },
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          ['seq', 'API', 'agent', 'status', 'trainable', 'tokens in', 'tokens out', 'latency ms', 'warnings'].map((label) =>
            h('th', {}, label),
          ),
        ),
      ),
      rows,
    ),
  )
  await loadPage(null)
}

function completionRows(record) {
  const detail = h(
    'tr',
    { hidden: true, class: 'detail' },
    h(
      'td',
      { colspan: 9 },
      h(
        'div',
        { class: 'side-by-side' },
        h(
          'div',
          {},
          h('h2', {}, "Harness's original request"),
          h('pre', { class: 'original' }, JSON.stringify(record.original_request, null, 2)),
        ),
        h(
          'div',
          {},
          h('h2', {}, 'Normalized (sent to the engine)'),
          h('pre', { class: 'normalized' }, JSON.stringify(record.request, null, 2)),
        ),
      ),
      h('h2', {}, 'Response'),
      h('pre', {}, JSON.stringify(record.response_message, null, 2)),
      record.warnings?.length ? h('pre', {}, record.warnings.map((warning) => `${warning.code}: ${warning.message}`).join('\n')) : null,
      record.error ? h('p', { class: 'error' }, record.error) : null,
    ),
  )
  const row = h(
    'tr',
    { class: 'expandable', dataset: { seq: record.seq }, onclick: () => (detail.hidden = !detail.hidden) },
    h('td', { class: 'num' }, record.seq),
    h('td', {}, record.api),
    h('td', {}, record.agent),
    h('td', {}, status(record.status)),
    h('td', {}, record.trainable ? 'yes' : 'no'),
    h('td', { class: 'num' }, record.prompt_token_ids?.length ?? '—'),
    h('td', { class: 'num' }, record.response_token_ids?.length ?? '—'),
    h('td', { class: 'num' }, record.timing?.total_ms ?? '—'),
    h('td', { class: 'num' }, record.warnings?.length ?? 0),
  )
  return [row, detail]
}

/** Runs of equal mask: the prompt (all context), then the response by loss mask. */
export function maskRuns(trace) {
  const runs = []
  if (trace.prompt_ids.length) runs.push({ mask: 0, start: -trace.prompt_ids.length, ids: trace.prompt_ids, prompt: true })
  let start = 0
  for (let i = 1; i <= trace.response_ids.length; i++) {
    if (i === trace.response_ids.length || trace.loss_mask[i] !== trace.loss_mask[start]) {
      runs.push({ mask: trace.loss_mask[start] ?? 0, start, ids: trace.response_ids.slice(start, i), prompt: false })
      start = i
    }
  }
  return runs
}

function turnAt(trace, offset) {
  return (trace.metadata?.turns ?? []).find(
    (turn) => offset >= turn.response_offset && offset < turn.response_offset + turn.response_length,
  )
}

function turnTitle(trace, run) {
  const turn = turnAt(trace, run.start)
  const logprobs = trace.response_logprobs ? trace.response_logprobs.slice(run.start, run.start + run.ids.length) : null
  const parts = [`${run.ids.length} trained tokens`]
  if (turn) parts.unshift(`turn seq ${turn.seq}`)
  if (logprobs?.length) parts.push(`mean logprob ${fmt(mean(logprobs))}`, `min ${fmt(Math.min(...logprobs))}`)
  if (turn?.context_drift_tokens) parts.push(`context drift ${turn.context_drift_tokens} (${turn.drift_reason})`)
  return parts.join(' · ')
}

async function traceView(sessionId, trace, index, advantage) {
  const runs = maskRuns(trace)
  const { texts } = await json(`/v1/sessions/${encodeURIComponent(sessionId)}/detokenize`, {
    method: 'POST',
    body: JSON.stringify({ segments: runs.map((run) => run.ids) }),
  }).catch((error) => {
    if (error instanceof Unauthorized) throw error
    return { texts: runs.map(() => null) }
  })
  const meta = trace.metadata ?? {}
  const tokens = h('div', { class: 'tokens' })
  if (meta.break_reason) tokens.append(h('span', { class: 'marker break', title: meta.break_detail ?? '' }, `break: ${meta.break_reason}`))
  runs.forEach((run, i) => {
    if (run.mask === 1) {
      const turn = turnAt(trace, run.start)
      if (turn?.context_drift_tokens) {
        tokens.append(
          h(
            'span',
            { class: 'marker drift', title: JSON.stringify(turn.drift_by_reason) },
            `drift ${turn.context_drift_tokens} (${turn.drift_reason})`,
          ),
        )
      }
    }
    tokens.append(
      h(
        'span',
        {
          class: `seg mask-${run.mask}`,
          dataset: { mask: run.mask, tokens: run.ids.length },
          title: run.mask === 1 ? turnTitle(trace, run) : `${run.ids.length} context tokens${run.prompt ? ' (prompt)' : ''}`,
        },
        texts[i] ?? `⟨${run.ids.length} tokens⟩`,
      ),
    )
  })
  const trained = trace.loss_mask.reduce((a, b) => a + b, 0)
  return h(
    'section',
    { class: 'trace', dataset: { trace: index } },
    h(
      'header',
      {},
      h('strong', {}, `Trace ${index}`),
      h('span', {}, `agent ${meta.agent ?? '—'}`),
      h('span', {}, `branch ${meta.branch ?? '—'}`),
      h('span', {}, `reward ${fmt(trace.reward)}`),
      h('span', {}, `advantage ${fmt(advantage)}`),
      h('span', {}, `prompt ${trace.prompt_ids.length} · response ${trace.response_ids.length} · trained ${trained}`),
      h('span', {}, `turns ${meta.turns?.length ?? 1}`),
      meta.break_reason ? h('span', { class: 'error' }, `break: ${meta.break_reason}`) : null,
    ),
    tokens,
  )
}

async function trajectoryPage(scope, sessionId, params) {
  const builder = params.get('builder') ?? 'prefix_merging'
  const page = Number(params.get('page') ?? 0)
  const trajectory = await json(`/v1/sessions/${encodeURIComponent(sessionId)}/trajectory?builder=${encodeURIComponent(builder)}`)
  let advantage = null
  let sessionReward = null
  try {
    const lifecycle = await json(`/rollout/session/${encodeURIComponent(sessionId)}`)
    const task = await json(`/rollout/task/${encodeURIComponent(lifecycle.task_id)}?results=false`)
    const at = task.sessions.findIndex((session) => session.session_id === sessionId)
    if (at >= 0) {
      advantage = leaveOneOut(task.sessions.map((session) => session.reward ?? null))[at]
      sessionReward = task.sessions[at].reward ?? null
    }
  } catch (error) {
    if (error instanceof Unauthorized) throw error
  }
  const traces = trajectory.traces.slice(page * TRACES_PER_PAGE, (page + 1) * TRACES_PER_PAGE)
  const select = h(
    'select',
    {
      id: 'builder',
      onchange: (event) => navigate(`/dashboard/trajectory/${encodeURIComponent(sessionId)}?builder=${event.target.value}`),
    },
    ['prefix_merging', 'per_request'].map((name) => h('option', { value: name, selected: name === builder }, name)),
  )
  const pages = Math.ceil(trajectory.traces.length / TRACES_PER_PAGE)
  const stats = trajectory.metadata?.reconstruction_stats ?? {}
  scope.render(
    h('h1', {}, 'Trajectory ', link(`/dashboard/session/${encodeURIComponent(sessionId)}`, sessionId)),
    h(
      'div',
      { class: 'cards' },
      card('status', status(trajectory.status)),
      card('traces', trajectory.traces.length),
      card('builder', select),
      card('merged turn ratio', fmt(stats.merged_turn_ratio ?? null, 2)),
    ),
    h(
      'p',
      { class: 'legend' },
      h('span', { class: 'seg mask-1' }, 'trained (loss mask 1)'),
      h('span', { class: 'seg mask-0' }, 'context (loss mask 0)'),
      h('span', { class: 'marker drift' }, 'drift'),
      h('span', { class: 'marker break' }, 'break'),
      h('span', { class: 'muted' }, 'hover a trained span for its turn and logprobs'),
    ),
    downloads(sessionId, builder),
    pages > 1
      ? h(
          'div',
          { class: 'pager' },
          Array.from({ length: pages }, (_, i) =>
            link(
              `/dashboard/trajectory/${encodeURIComponent(sessionId)}?builder=${builder}&page=${i}`,
              i === page ? `[${i + 1}]` : String(i + 1),
            ),
          ),
        )
      : null,
    ...(await Promise.all(
      traces.map((trace, i) =>
        traceView(sessionId, { ...trace, reward: trace.reward ?? sessionReward }, page * TRACES_PER_PAGE + i, advantage),
      ),
    )),
  )
}

// --- router ----------------------------------------------------------------------------------------

function navigate(path) {
  history.pushState(null, '', path)
  route()
}

async function route() {
  const scope = enterPage()
  if (!sessionStorage.getItem(TOKEN_KEY)) return loginPage()
  document.getElementById('nav').hidden = false
  const path = location.pathname.replace(/\/+$/, '')
  const params = new URLSearchParams(location.search)
  const [, , page, id] = path.split('/')
  for (const anchor of document.querySelectorAll('[data-nav]')) anchor.classList.toggle('active', anchor.dataset.nav === (page ?? 'tasks'))
  try {
    if (!page || page === 'login') await tasksPage(scope)
    else if (page === 'runners') await runnersPage(scope)
    else if (page === 'task' && id) await taskPage(scope, decodeURIComponent(id))
    else if (page === 'session' && id) await sessionPage(scope, decodeURIComponent(id))
    else if (page === 'trajectory' && id) await trajectoryPage(scope, decodeURIComponent(id), params)
    else scope.render(h('p', {}, 'Unknown page. '), link('/dashboard', 'Tasks'))
  } catch (error) {
    if (!scope.live) return
    if (error instanceof Unauthorized) return logout('Token refused by the edge.')
    scope.render(h('p', { class: 'error', role: 'alert' }, error.message))
  }
}

document.addEventListener('click', (event) => {
  const anchor = event.target.closest?.('a[href^="/dashboard"]')
  if (!anchor || event.metaKey || event.ctrlKey || anchor.hasAttribute('download')) return
  event.preventDefault()
  navigate(anchor.getAttribute('href'))
})
window.addEventListener('popstate', route)
document.getElementById('logout').addEventListener('click', () => logout())
document.getElementById('lookup').addEventListener('submit', (event) => {
  event.preventDefault()
  const value = new FormData(event.target).get('session')?.toString().trim()
  if (value) navigate(`/dashboard/session/${encodeURIComponent(value)}`)
})
route()
