/**
 * @module
 * OpenAPI 3.1 from the operations table: JSON Schemas come from the route's own zod schemas
 * (`z.toJSONSchema`, request side as input, answers as output), security schemes from the auth kind.
 */
import { z } from 'zod'
import { OPERATIONS, type Operation } from './operations.ts'

type Json = Record<string, unknown>

/** `/v1/sessions/:id` → `/v1/sessions/{id}`; `/:version/models/:model:generateContent` → `/{version}/models/{model}:generateContent`. */
export function openApiPath(path: string): string {
  return path.replace(/:([A-Za-z_]+)/g, '{$1}')
}

export function pathParameters(path: string): string[] {
  return [...path.matchAll(/:([A-Za-z_]+)/g)].map((match) => match[1] as string)
}

function schema(type: z.ZodType, io: 'input' | 'output'): Json {
  const json = z.toJSONSchema(type, { io, unrepresentable: 'any', target: 'draft-2020-12' }) as Json
  delete json.$schema
  return json
}

const SECURITY: Record<Operation['auth'], Json[]> = {
  none: [],
  admin: [{ adminBearer: [] }],
  runner: [{ runnerBearer: [] }],
  session: [{ sessionBearer: [] }, { sessionApiKey: [] }, { sessionGoogleKey: [] }, { sessionQueryKey: [] }],
}

function operationObject(operation: Operation): Json {
  const parameters: Json[] = pathParameters(operation.path).map((name) => ({
    name,
    in: 'path',
    required: true,
    schema: { type: 'string' },
  }))
  if (operation.query) {
    for (const [name, field] of Object.entries(operation.query.shape)) {
      const fieldSchema = schema(field as z.ZodType, 'input')
      parameters.push({
        name,
        in: 'query',
        required: !(field as z.ZodType).safeParse(undefined).success,
        schema: fieldSchema,
        ...((field as z.ZodType).description ? { description: (field as z.ZodType).description } : {}),
      })
    }
  }
  const status = String(operation.status ?? 200)
  const contentType = operation.contentType ?? 'application/json'
  return {
    operationId: `${operation.method}${openApiPath(operation.path).replace(/[^A-Za-z0-9]+(.)?/g, (_, c: string | undefined) => (c ? c.toUpperCase() : ''))}`,
    summary: operation.summary,
    tags: [operation.tag],
    security: SECURITY[operation.auth],
    ...(parameters.length ? { parameters } : {}),
    ...(operation.body
      ? {
          requestBody: {
            required: true,
            content: {
              'application/json': { schema: schema(operation.body, 'input'), ...(operation.example ? { example: operation.example } : {}) },
            },
          },
        }
      : {}),
    responses: {
      [status]: {
        description: 'success',
        ...(operation.method === 'head' || status === '101'
          ? {}
          : { content: { [contentType]: operation.response ? { schema: schema(operation.response, 'output') } : {} } }),
      },
      default: { description: "error, in the caller's own wire format (OpenAI, Anthropic or Google shape)" },
    },
  }
}

export function openApiDocument(serverUrl: string): Json {
  const paths: Record<string, Json> = {}
  for (const operation of OPERATIONS) {
    const key = openApiPath(operation.path)
    paths[key] = { ...(paths[key] ?? {}), [operation.method]: operationObject(operation) }
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Rollgate edge',
      version: '1',
      description:
        'Token-faithful capture gateway for RL on coding agents. Session (model API) routes are also served under ' +
        'the base-URL prefixes /s/{token} and /s/{token}/a/{agent} (the agent label).',
    },
    servers: [{ url: serverUrl }],
    components: {
      securitySchemes: {
        adminBearer: { type: 'http', scheme: 'bearer', description: 'ROLLGATE_ADMIN_TOKEN' },
        runnerBearer: { type: 'http', scheme: 'bearer', description: 'ROLLGATE_RUNNER_TOKEN (enrolment) + x-rollgate-runner-secret' },
        sessionBearer: { type: 'http', scheme: 'bearer', description: 'per-session token rg_…' },
        sessionApiKey: { type: 'apiKey', in: 'header', name: 'x-api-key' },
        sessionGoogleKey: { type: 'apiKey', in: 'header', name: 'x-goog-api-key' },
        sessionQueryKey: { type: 'apiKey', in: 'query', name: 'key' },
      },
    },
    paths,
  }
}
