/**
 * `pi` and `qwen_code` end to end, exactly as the runner runs them: the pinned CLI from the per-host cache
 * (qwen_code: the devDependency copy) mounted read-only into the **local runtime** (bubblewrap, loopback-only
 * network namespace, only the forwarded edge port reachable), its rendered files, env and command, against
 * the real edge (`wrangler dev`) and the stand-in engine (scripted policy: create `hello.txt` containing `hi`).
 * Per harness: the file exists with `hi`; every model call the engine served for the session was captured
 * (counted at the engine), each as a trainable completion of the variant's API; the captured tokens are
 * exactly the engine's (prompt = the engine's own tokenization of the normalized request, response ids and
 * logprobs = what the engine sampled); step logs are in the session dir.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { getHarness } from '../../runner/harness/index.ts'
import { installHarness } from '../../runner/harness/install.ts'
import { cliMounts, cliPath, runHarnessPlan } from '../../runner/harness/run.ts'
import { createRuntime } from '../../runner/runtime/index.ts'
import type { Runtime } from '../../runner/runtime/runtime.ts'
import { runtimeSpecSchema } from '../../src/contract/rollout.ts'
import { agentSpecSchema } from '../../src/contract/rollout.ts'
import { type EngineTap, startEngineTap } from '../../scripts/lib/engine-tap.ts'
import { checkSession } from '../../scripts/lib/rollout-checks.ts'
import type { Trajectory } from '../../src/contract/trajectory.ts'
import { ADMIN_TOKEN, engineTokenize, type Stack, startStack } from '../support/stack.ts'

let stack: Stack
let tap: EngineTap
let base: string

beforeAll(async () => {
  stack = await startStack({ maxModelLen: 262_144 })
  tap = await startEngineTap(stack.engine.url)
  base = mkdtempSync(join(tmpdir(), 'rollgate-harness-e2e-'))
})
afterAll(async () => {
  await tap?.close()
  await stack?.stop()
  if (base) rmSync(base, { recursive: true, force: true })
})

const CASES = [
  { harness: 'qwen_code', variant: 'qwen-code', api: 'openai-chat' },
  { harness: 'pi', variant: 'pi', api: 'openai-chat' },
] as const

describe('harnesses end to end through the local runtime', () => {
  it.each(CASES)(
    '$harness ($variant) creates hello.txt; every engine call captured with exact tokens',
    async ({ harness: name, variant, api }) => {
      const harness = getHarness(name)
      const cli = await installHarness(harness.pkg!)
      const session = await stack.createSession({ task_id: `e2e-${variant}`, upstream: { url: tap.url } })
      const sessionDir = join(base, variant)
      mkdirSync(join(sessionDir, 'logs/agent'), { recursive: true })
      const runtime: Runtime = createRuntime(
        runtimeSpecSchema.parse({ backend: 'local' }),
        { sessionId: session.session_id, sessionDir, edgeUrl: stack.edge.url },
        { local: { readOnlyBinds: cliMounts(cli).map((dir) => ({ source: dir, target: dir })) } },
      )
      const firstCall = tap.calls.length
      try {
        await runtime.start()
        const plan = harness.render({
          instruction: 'create hello.txt containing hi',
          edgeUrl: runtime.edgeUrlInside,
          token: session.token,
          agent: agentSpecSchema.parse({ harness: name }),
          variant,
          cliPath: cli.bin,
          sessionDir: '/polar/session',
          homeDir: runtime.homeDir,
          workDir: runtime.workDir,
        })
        const result = await runHarnessPlan(runtime, plan, { sessionDirHost: sessionDir, baseEnv: { PATH: cliPath() }, timeoutMs: 120_000 })
        const stderr = readFileSync(join(sessionDir, 'logs/agent', `${plan.steps[0]!.name}.stderr.log`), 'utf8')
        expect(result, stderr.slice(-2000)).toMatchObject({ status: 'completed', return_code: 0 })
        const hello = join(base, 'hello.txt')
        await runtime.download(`${runtime.workDir}/hello.txt`, hello)
        expect(readFileSync(hello, 'utf8').trim()).toBe('hi')
        rmSync(hello)
      } finally {
        await runtime.stop()
      }

      const served = tap.calls.slice(firstCall)
      const records = await stack.completions(session.session_id)
      expect(served.length).toBeGreaterThanOrEqual(2)
      for (const record of records) expect(record).toMatchObject({ status: 'ok', trainable: true, api, stream: true })
      // The captured prompt is the engine's own tokenization of the request it was sent.
      for (const [index, call] of served.entries()) {
        const extra = call.body.chat_template_kwargs ? { chat_template_kwargs: call.body.chat_template_kwargs } : {}
        expect(records[index]!.prompt_token_ids).toEqual(
          await engineTokenize(stack.engine.url, call.body.messages ?? [], call.body.tools, extra),
        )
      }
      const trajectory = async (builder: string) => {
        const response = await fetch(`${stack.edge.url}/v1/sessions/${session.session_id}/trajectory?builder=${builder}`, {
          headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
        })
        expect(response.status).toBe(200)
        return (await response.json()) as Trajectory
      }
      const check = checkSession({
        served,
        records,
        perRequest: await trajectory('per_request'),
        prefixMerging: await trajectory('prefix_merging'),
      })
      expect(check.problems).toEqual([])
      expect(check).toMatchObject({ calls: records.length, captured: records.length, mismatches: 0, traces_prefix_merging: 1 })
    },
  )
})
