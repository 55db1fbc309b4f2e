/**
 * @module engine/cli
 * `npm run engine -- --port 8000 [--policy scripted|script|drift] [--script turns.json]
 * [--seed N] [--latency-ms N] [--token-delay-ms N] [--served-model NAME] [--max-model-len N]
 * [--drift-rate R] [--accept-any-model] [--host 127.0.0.1]`
 */

import { readFileSync } from 'node:fs'
import { parseArgs } from 'node:util'
import { z } from 'zod'
import { isPolicyName, POLICY_NAMES } from './policy/registry.ts'
import { type ScriptTurn, scriptSchema } from './policy/script.ts'
import { DEFAULT_HOST, DEFAULT_MAX_MODEL_LEN, DEFAULT_SERVED_MODEL, startEngine } from './server.ts'
import { describePortHolder } from '../scripts/lib/port-holder.ts'

const DEFAULT_PORT = 8000

const USAGE = `usage: npm run engine -- [options]   (also: npx rollgate engine …)

Rollgate stand-in inference engine (vLLM-compatible, Qwen3 tokenizer + chat template).

Options:
  --port <n>             port (default ${DEFAULT_PORT}; 0 = ephemeral)
  --host <addr>          bind address (default ${DEFAULT_HOST})
  --policy <name>        ${POLICY_NAMES.join(' | ')} (default scripted)
  --script <file.json>   turns for the script policy: [{content?, reasoning?, tool_calls?: [{name, arguments}]}]
  --seed <n>             seed for policies and logprobs (default 0)
  --latency-ms <n>       delay before each generation response (default 0)
  --token-delay-ms <n>   extra delay per sampled token / SSE frame (default 0)
  --served-model <name>  model name (default ${DEFAULT_SERVED_MODEL})
  --max-model-len <n>    context window (default ${DEFAULT_MAX_MODEL_LEN})
  --drift-rate <r>       share of eligible tokens re-split in drift mode (default 0.2)
  --accept-any-model     do not answer 404 for unknown "model" values
  -h, --help             show this help`

/** Bad flags: one `error:` line and the usage, exit 2 (as the repo's other scripts); a start failure exits 1. */
class UsageError extends Error {}

function integerOption(values: Record<string, unknown>, name: string, fallback: number): number {
  const raw = values[name]
  if (raw === undefined) return fallback
  const value = Number(raw)
  if (!Number.isFinite(value) || value < 0) throw new UsageError(`--${name} must be a non-negative number, got "${raw}"`)
  return value
}

/** The `--script` turns; a file that cannot be read, is not JSON or not a list of turns is a usage error (exit 2). */
function loadScript(path: string): ScriptTurn[] {
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch (error) {
    throw new UsageError(`--script ${path}: cannot read it (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`)
  }
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch (error) {
    throw new UsageError(`--script ${path} is not JSON: ${(error as Error).message}`)
  }
  const parsed = scriptSchema.safeParse(json)
  if (!parsed.success) throw new UsageError(`--script ${path}: ${z.prettifyError(parsed.error).replaceAll('\n', '; ')}`)
  return parsed.data
}

function flags() {
  try {
    return parseArgs({
      options: {
        port: { type: 'string' },
        host: { type: 'string' },
        policy: { type: 'string' },
        script: { type: 'string' },
        seed: { type: 'string' },
        'latency-ms': { type: 'string' },
        'token-delay-ms': { type: 'string' },
        'served-model': { type: 'string' },
        'max-model-len': { type: 'string' },
        'drift-rate': { type: 'string' },
        'accept-any-model': { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    })
  } catch (error) {
    throw new UsageError((error as Error).message)
  }
}

async function main(): Promise<void> {
  const { values } = flags()
  if (values.help === true) {
    console.log(USAGE)
    return
  }
  const policy = values.policy ?? (values.script === undefined ? 'scripted' : 'script')
  if (!isPolicyName(policy)) throw new UsageError(`--policy must be one of ${POLICY_NAMES.join(', ')}, got "${policy}"`)
  const engine = await startEngine({
    port: integerOption(values, 'port', DEFAULT_PORT),
    host: values.host ?? DEFAULT_HOST,
    policy,
    script: values.script === undefined ? null : loadScript(values.script),
    seed: integerOption(values, 'seed', 0),
    latencyMs: integerOption(values, 'latency-ms', 0),
    tokenDelayMs: integerOption(values, 'token-delay-ms', 0),
    servedModel: values['served-model'] ?? DEFAULT_SERVED_MODEL,
    maxModelLen: integerOption(values, 'max-model-len', DEFAULT_MAX_MODEL_LEN),
    ...(values['drift-rate'] === undefined ? {} : { driftRate: Number(values['drift-rate']) }),
    acceptAnyModel: values['accept-any-model'] === true,
  })
  const state = engine.stats().policy
  console.log(`stand-in engine listening on ${engine.url} (OpenAI base ${engine.url}/v1; ` + `policy ${state.policy}, seed ${state.seed})`)
  const shutdown = () => {
    engine.close().then(
      () => process.exit(0),
      () => process.exit(1),
    )
  }
  process.once('SIGINT', shutdown)
  process.once('SIGTERM', shutdown)
}

main().catch((error: unknown) => {
  if (error instanceof UsageError) {
    console.error(`error: ${error.message}\n\n${USAGE}`)
    process.exit(2)
  }
  const { code, port } = error as NodeJS.ErrnoException & { port?: number }
  if (code === 'EADDRINUSE' && port !== undefined) {
    // As dev / dev:stack say it: which port, what holds it, what to do (was the bare listen error).
    console.error(
      `error: port ${port} is already in use (${describePortHolder(port)}another engine still running?): stop it, or pick another with --port`,
    )
    process.exit(1)
  }
  console.error(`engine: ${(error as Error).message}`)
  process.exit(1)
})
