/**
 * @module
 * pi (`pi -p`). A `rollgate` provider in `~/.pi/agent/models.json` whose `api` picks the wire:
 * `openai-completions` (chat, base `…/v1`), `openai-responses` (`…/v1`), `anthropic-messages` (bare
 * origin), `google-generative-ai` (`…/v1beta`). The key is read from `ROLLGATE_API_KEY`. Offline mode,
 * no version check, no telemetry, no session file. One model call per turn, no side calls.
 */
import { cli, commonEnv, finishPlan, jsonFile, rejectUnsupported, resolveModel, resolveVariant, shellJoin } from './common.ts'
import type { Harness } from './harness.ts'

const PROVIDERS: Record<string, { api: string; baseSuffix: string }> = {
  pi: { api: 'openai-completions', baseSuffix: '/v1' },
  'pi-anthropic': { api: 'anthropic-messages', baseSuffix: '' },
  'pi-responses': { api: 'openai-responses', baseSuffix: '/v1' },
  'pi-google': { api: 'google-generative-ai', baseSuffix: '/v1beta' },
}

export const pi: Harness = {
  name: 'pi',
  pkg: { name: '@mariozechner/pi-coding-agent', version: '0.73.1', bin: 'pi', approxBytes: 157e6 },
  variants: [
    { id: 'pi', api: 'openai-chat', description: 'openai-completions', defaultModel: 'test-model' },
    { id: 'pi-responses', api: 'openai-responses', description: 'openai-responses', defaultModel: 'test-model' },
    { id: 'pi-anthropic', api: 'anthropic', description: 'anthropic-messages', defaultModel: 'test-model' },
    { id: 'pi-google', api: 'google', description: 'google-generative-ai', defaultModel: 'test-model' },
  ],
  render(input) {
    rejectUnsupported('pi', input)
    const variant = resolveVariant(pi, input.variant)
    const { api, baseSuffix } = PROVIDERS[variant.id]!
    const model = resolveModel(input, variant) ?? 'test-model'
    const agentDir = `${input.homeDir}/.pi/agent`
    const args = ['--offline', '--no-session', '--provider', 'rollgate', '--model', model, '-p', input.instruction]
    return finishPlan(input, {
      files: [
        jsonFile(`${agentDir}/models.json`, {
          providers: {
            rollgate: {
              baseUrl: `${input.edgeUrl}${baseSuffix}`,
              api,
              apiKey: 'ROLLGATE_API_KEY',
              models: [{ id: model, name: model, reasoning: false, input: ['text'], contextWindow: 128000, maxTokens: 16384 }],
            },
          },
        }),
        jsonFile(`${agentDir}/settings.json`, { enableInstallTelemetry: false }),
      ],
      env: { ...commonEnv(input), ROLLGATE_API_KEY: input.token, PI_OFFLINE: '1', PI_SKIP_VERSION_CHECK: '1', PI_TELEMETRY: '0' },
      steps: [{ name: 'pi', command: `${cli(input, 'pi')} ${shellJoin(args)} </dev/null`, cwd: input.workDir }],
      postrunSteps: [],
    })
  },
}
