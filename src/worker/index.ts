/**
 * @module
 * Worker entry: the hono app plus the Durable Object classes wrangler binds.
 */
import { openaiChat } from '../normalize/providers/openai-chat/index.ts'
import { app } from './app.ts'
import { rewriteAdminPath } from './auth/admin-path.ts'

export { SessionObject } from '../durable/session/index.ts'
export { TaskObject } from '../durable/task/index.ts'
export { RunnerHub, RunnerLink } from '../durable/runner/index.ts'
export { InferenceGate } from '../durable/gate/index.ts'

export default {
  fetch(request, env, ctx) {
    const admin = rewriteAdminPath(request)
    if (admin.kind === 'rewritten') return app.fetch(admin.request, env, ctx)
    if (admin.kind === 'not_found') {
      // Never echo the path: it carries the token.
      const { status, body } = openaiChat.buildError({
        status: 404,
        kind: 'not_found',
        message: 'no admin route under /t/<token>/ for this path',
      })
      return Response.json(body, { status, headers: { 'x-rollgate-error-source': 'edge' } })
    }
    return app.fetch(request, env, ctx)
  },
} satisfies ExportedHandler<Env>
