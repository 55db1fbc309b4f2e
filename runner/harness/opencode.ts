/**
 * @module
 * opencode (`opencode run`). The wire follows the AI-SDK provider package of a `rollgate` provider in
 * `opencode.json`: `@ai-sdk/openai-compatible` (chat), `@ai-sdk/openai` (Responses), `@ai-sdk/anthropic`
 * (Messages, base URL with `/v1`), `@ai-sdk/google` (Gemini, base `…/v1beta`); all bundled, nothing is
 * fetched. Auto-update, sharing, models.dev fetch, default plugins and LSP downloads off; XDG dirs in the
 * harness HOME. The first call is opencode's title side call (`small_model`).
 */
import {
  cli,
  commonEnv,
  finishPlan,
  jsonFile,
  keepLogs,
  type ProviderWire,
  providerVariants,
  resolveProviderWire,
  shellJoin,
} from './common.ts'
import type { Harness } from './harness.ts'

/** `provider`: the AI-SDK package of the `rollgate` provider. */
const WIRES: ProviderWire[] = [
  { id: 'opencode', api: 'openai-chat', provider: '@ai-sdk/openai-compatible', baseSuffix: '/v1' },
  { id: 'opencode-responses', api: 'openai-responses', provider: '@ai-sdk/openai', baseSuffix: '/v1' },
  { id: 'opencode-anthropic', api: 'anthropic', provider: '@ai-sdk/anthropic', baseSuffix: '/v1' },
  { id: 'opencode-google', api: 'google', provider: '@ai-sdk/google', baseSuffix: '/v1beta' },
]

export const opencode: Harness = {
  name: 'opencode',
  pkg: { name: 'opencode-ai', version: '1.18.33', bin: 'opencode', approxBytes: 354e6 },
  variants: providerVariants(WIRES, 'test-model'),
  render(input) {
    const { wire, model: asked } = resolveProviderWire(opencode, WIRES, input)
    // @ai-sdk/google takes a model id containing `/` for a resource path (`/v1beta/Qwen/Qwen3-8B:…`, no
    // `models/`), which no Gemini route matches: ask for its last segment (the edge maps any name anyway).
    const model = wire.api === 'google' ? asked.slice(asked.lastIndexOf('/') + 1) : asked
    const home = input.homeDir
    return finishPlan(input, {
      files: [
        jsonFile(`${home}/.config/opencode/opencode.json`, {
          $schema: 'https://opencode.ai/config.json',
          autoupdate: false,
          share: 'disabled',
          model: `rollgate/${model}`,
          small_model: `rollgate/${model}`,
          permission: { edit: 'allow', bash: 'allow', webfetch: 'deny' },
          provider: {
            rollgate: {
              npm: wire.provider,
              name: 'Rollgate',
              options: { baseURL: `${input.edgeUrl}${wire.baseSuffix}`, apiKey: input.token },
              models: { [model]: { name: model, tool_call: true } },
            },
          },
        }),
      ],
      env: {
        ...commonEnv(input),
        XDG_CONFIG_HOME: `${home}/.config`,
        XDG_DATA_HOME: `${home}/.local/share`,
        XDG_CACHE_HOME: `${home}/.cache`,
        XDG_STATE_HOME: `${home}/.local/state`,
        OPENCODE_DISABLE_AUTOUPDATE: '1',
        OPENCODE_DISABLE_MODELS_FETCH: '1',
        OPENCODE_DISABLE_DEFAULT_PLUGINS: '1',
        OPENCODE_DISABLE_LSP_DOWNLOAD: '1',
        OPENCODE_DISABLE_SHARE: '1',
      },
      steps: [
        {
          name: 'opencode',
          // `opencode run` re-joins its positional words and wraps any word containing a space in double
          // quotes, so one argument would reach the model quoted: pass the words instead.
          command: `${cli(input, 'opencode')} ${shellJoin(['run', '--print-logs', '--', ...input.instruction.split(/\s+/).filter(Boolean)])} </dev/null`,
          cwd: input.workDir,
        },
      ],
      postrunSteps: [keepLogs(input, 'opencode-data', `${home}/.local/share/opencode`)],
    })
  },
}
