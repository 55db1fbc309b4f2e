/**
 * @module
 * The floor Workers of `bench:gateway`: what any gateway in workerd must at least do, and nothing more.
 *
 * `/floor/*`: parses the chat request, forwards it to the engine (`env.FLOOR_UPSTREAM_URL`, the same
 * vLLM-shaped stub the edge calls), parses the engine's answer and returns a small JSON. No storage, no
 * authentication, no Durable Object.
 *
 * `/floor-durable/*`: the same plus the least a *durable* capture needs in workerd: one Durable Object
 * round trip before the engine call (a session's "may it still call?" check) and one after it that commits
 * the request text and the answer's token ids and logprobs to the object's SQLite (one row, as binary),
 * answered only once the commit is durable (the output gate). Sessions are named by `x-floor-session`.
 * The gap between the two floors is the price of durability in this runtime, which no gateway avoids.
 *
 * `/floor-onehop/*`: the other shape a durable capture can take: the Worker hands the request bytes to the
 * session object in one RPC, and the object itself checks, calls the engine, parses its answer, commits the
 * same row and returns the small JSON (one round trip instead of two; the answer's token data never crosses
 * an RPC). A design alternative to the durable floor, measured next to it.
 *
 * It runs in the same Miniflare (same workerd) as the edge, so the edge's figures read as ratios to these.
 */
import { DurableObject } from 'cloudflare:workers'

export class FloorSession extends DurableObject {
  /**
   * @param {DurableObjectState} ctx
   * @param {unknown} env
   */
  constructor(ctx, env) {
    super(ctx, env)
    this.sql = ctx.storage.sql
    this.sql.exec('CREATE TABLE IF NOT EXISTS calls (seq INTEGER PRIMARY KEY, request TEXT, prompt BLOB, response BLOB, logprobs BLOB)')
  }

  /** The pre-call check: nothing to refuse here, but the round trip is real. */
  check() {
    return null
  }

  /**
   * @param {string} request
   * @param {Uint32Array} prompt
   * @param {Uint32Array} response
   * @param {Float64Array} logprobs
   */
  record(request, prompt, response, logprobs) {
    this.sql.exec(
      'INSERT INTO calls (request, prompt, response, logprobs) VALUES (?, ?, ?, ?)',
      request,
      prompt.buffer,
      response.buffer,
      logprobs.buffer,
    )
    return this.sql.exec('SELECT last_insert_rowid() AS seq').one().seq
  }

  /**
   * The one-hop shape: the whole call inside the object (engine call included); answers the small JSON.
   * @param {ArrayBuffer} bytes the request body
   * @param {string} upstreamUrl
   */
  async call(bytes, upstreamUrl) {
    const text = new TextDecoder().decode(bytes)
    const body = JSON.parse(text)
    if (typeof body !== 'object' || body === null || !Array.isArray(body.messages))
      return { status: 400, body: { error: { message: 'messages must be an array' } } }
    const upstream = await fetch(`${upstreamUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    })
    const answer = JSON.parse(await upstream.text())
    const choice = answer.choices?.[0]
    const logprobs = (choice?.logprobs?.content ?? []).map((/** @type {{ logprob: number }} */ entry) => entry.logprob)
    this.record(
      text,
      Uint32Array.from(answer.prompt_token_ids ?? []),
      Uint32Array.from(choice?.token_ids ?? []),
      Float64Array.from(logprobs),
    )
    return { status: 200, body: smallAnswer(answer) }
  }
}

/** @param {any} answer */
function smallAnswer(answer) {
  const choice = answer.choices?.[0]
  return {
    id: answer.id,
    content: choice?.message?.content ?? null,
    finish_reason: choice?.finish_reason ?? null,
    prompt_tokens: Array.isArray(answer.prompt_token_ids) ? answer.prompt_token_ids.length : 0,
    completion_tokens: Array.isArray(choice?.token_ids) ? choice.token_ids.length : 0,
  }
}

export default {
  /**
   * @param {Request} request
   * @param {{ FLOOR_UPSTREAM_URL: string, FLOOR_SESSIONS: DurableObjectNamespace<FloorSession> }} env
   */
  async fetch(request, env) {
    const path = new URL(request.url).pathname
    if (path.startsWith('/floor-onehop/')) {
      const session = env.FLOOR_SESSIONS.get(env.FLOOR_SESSIONS.idFromName(request.headers.get('x-floor-session') ?? 'one'))
      const { status, body } = await session.call(await request.arrayBuffer(), env.FLOOR_UPSTREAM_URL)
      return Response.json(body, { status })
    }
    const durable = path.startsWith('/floor-durable/')
    const session = durable ? env.FLOOR_SESSIONS.get(env.FLOOR_SESSIONS.idFromName(request.headers.get('x-floor-session') ?? 'one')) : null
    const checked = session?.check()
    const text = await request.text()
    const body = JSON.parse(text)
    if (typeof body !== 'object' || body === null || !Array.isArray(body.messages)) {
      return Response.json({ error: { message: 'messages must be an array' } }, { status: 400 })
    }
    await checked
    const upstream = await fetch(`${env.FLOOR_UPSTREAM_URL}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    })
    const answer = JSON.parse(await upstream.text())
    const choice = answer.choices?.[0]
    if (session) {
      const logprobs = (choice?.logprobs?.content ?? []).map((/** @type {{ logprob: number }} */ entry) => entry.logprob)
      await session.record(
        text,
        Uint32Array.from(answer.prompt_token_ids ?? []),
        Uint32Array.from(choice?.token_ids ?? []),
        Float64Array.from(logprobs),
      )
    }
    return Response.json(smallAnswer(answer))
  },
}
