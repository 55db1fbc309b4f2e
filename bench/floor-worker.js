/**
 * @module
 * The bare floor Worker of `bench:gateway`: what any gateway in workerd must at least do, and nothing
 * more. It parses the chat request, forwards it to the engine (`env.FLOOR_UPSTREAM_URL`, the same
 * vLLM-shaped stub the edge calls), parses the engine's answer and returns a small JSON. No storage,
 * no authentication, no Durable Object. It runs in the same Miniflare (same workerd) as the edge,
 * routed at `/floor/*`, so the edge's figures can be read as ratios to this floor.
 */
export default {
  /**
   * @param {Request} request
   * @param {{ FLOOR_UPSTREAM_URL: string }} env
   */
  async fetch(request, env) {
    const body = JSON.parse(await request.text())
    if (typeof body !== 'object' || body === null || !Array.isArray(body.messages)) {
      return Response.json({ error: { message: 'messages must be an array' } }, { status: 400 })
    }
    const upstream = await fetch(`${env.FLOOR_UPSTREAM_URL}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    })
    const answer = JSON.parse(await upstream.text())
    const choice = answer.choices?.[0]
    return Response.json({
      id: answer.id,
      content: choice?.message?.content ?? null,
      finish_reason: choice?.finish_reason ?? null,
      prompt_tokens: Array.isArray(answer.prompt_token_ids) ? answer.prompt_token_ids.length : 0,
      completion_tokens: Array.isArray(choice?.token_ids) ? choice.token_ids.length : 0,
    })
  },
}
