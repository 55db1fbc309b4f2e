/**
 * @module
 * pi (`pi -p`). A `rollgate` provider in `~/.pi/agent/models.json` whose `api` picks the wire:
 * `openai-completions` (chat, base `…/v1`), `openai-responses` (`…/v1`), `anthropic-messages` (bare
 * origin), `google-generative-ai` (`…/v1beta`). The key is read from `ROLLGATE_API_KEY`. Offline mode,
 * no version check, no telemetry, no session file. One model call per turn, no side calls.
 */
import { cli, commonEnv, finishPlan, jsonFile, type ProviderWire, providerVariants, resolveProviderWire, shellJoin } from './common.ts'
import type { Harness } from './harness.ts'

/** `provider`: pi's `api` of the `rollgate` provider. */
const WIRES: ProviderWire[] = [
  { id: 'pi', api: 'openai-chat', provider: 'openai-completions', baseSuffix: '/v1' },
  { id: 'pi-responses', api: 'openai-responses', provider: 'openai-responses', baseSuffix: '/v1' },
  { id: 'pi-anthropic', api: 'anthropic', provider: 'anthropic-messages', baseSuffix: '' },
  { id: 'pi-google', api: 'google', provider: 'google-generative-ai', baseSuffix: '/v1beta' },
]

export const pi: Harness = {
  name: 'pi',
  pkg: { name: '@mariozechner/pi-coding-agent', version: '0.73.1', bin: 'pi', approxBytes: 157e6 },
  variants: providerVariants(WIRES, 'test-model'),
  render(input) {
    const { wire, model } = resolveProviderWire(pi, WIRES, input)
    const agentDir = `${input.homeDir}/.pi/agent`
    const args = ['--offline', '--no-session', '--provider', 'rollgate', '--model', model, '-p', input.instruction]
    return finishPlan(input, {
      files: [
        jsonFile(`${agentDir}/models.json`, {
          providers: {
            rollgate: {
              baseUrl: `${input.edgeUrl}${wire.baseSuffix}`,
              api: wire.provider,
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
