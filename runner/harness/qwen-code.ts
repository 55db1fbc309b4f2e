/**
 * @module
 * Qwen Code (`qwen --yolo --prompt`). OpenAI chat by default (`OPENAI_BASE_URL=<edge>/v1`,
 * `OPENAI_API_KEY`, `OPENAI_MODEL`; no `--model`, it conflicts), Anthropic or Gemini by
 * `security.auth.selectedType` in `~/.qwen/settings.json`. Auto-update, usage statistics and telemetry off.
 */
import { cli, commonEnv, finishPlan, jsonFile, keepLogs, rejectUnsupported, resolveModel, resolveVariant, shellJoin } from './common.ts'
import type { Harness } from './harness.ts'

const WIRE = { 'qwen-code': 'openai', 'qwen-code-anthropic': 'anthropic', 'qwen-code-gemini': 'gemini' } as const

export const qwenCode: Harness = {
  name: 'qwen_code',
  pkg: { name: '@qwen-code/qwen-code', version: '0.24.4', bin: 'qwen', approxBytes: 155e6 },
  variants: [
    { id: 'qwen-code', api: 'openai-chat', description: 'OpenAI chat (selectedType openai)', defaultModel: 'qwen3-coder-plus' },
    {
      id: 'qwen-code-anthropic',
      api: 'anthropic',
      description: 'Anthropic Messages (selectedType anthropic)',
      defaultModel: 'claude-sonnet-4-5',
    },
    {
      id: 'qwen-code-gemini',
      api: 'google',
      description: 'Gemini (selectedType gemini, modelProviders)',
      defaultModel: 'gemini-2.5-flash',
    },
  ],
  render(input) {
    rejectUnsupported('qwen_code', input)
    const variant = resolveVariant(qwenCode, input.variant)
    const wire = WIRE[variant.id as keyof typeof WIRE]
    const model = resolveModel(input, variant) ?? variant.defaultModel!
    const env: Record<string, string> = { ...commonEnv(input), QWEN_TELEMETRY_ENABLED: 'false' }
    if (wire === 'openai') Object.assign(env, { OPENAI_BASE_URL: `${input.edgeUrl}/v1`, OPENAI_API_KEY: input.token, OPENAI_MODEL: model })
    if (wire === 'anthropic')
      Object.assign(env, { ANTHROPIC_BASE_URL: input.edgeUrl, ANTHROPIC_API_KEY: input.token, ANTHROPIC_MODEL: model })
    if (wire === 'gemini') Object.assign(env, { GEMINI_API_KEY: input.token })
    return finishPlan(input, {
      files: [
        jsonFile(`${input.homeDir}/.qwen/settings.json`, {
          general: { enableAutoUpdate: false },
          privacy: { usageStatisticsEnabled: false },
          telemetry: { enabled: false },
          security: { auth: { selectedType: wire }, folderTrust: { enabled: false } },
          model: { name: model },
          ...(wire === 'gemini' ? { modelProviders: { gemini: [{ id: model, envKey: 'GEMINI_API_KEY', baseUrl: input.edgeUrl }] } } : {}),
        }),
      ],
      env,
      steps: [
        {
          name: 'qwen',
          command: `${cli(input, 'qwen')} ${shellJoin(['--yolo', '--prompt', input.instruction])} </dev/null`,
          cwd: input.workDir,
        },
      ],
      postrunSteps: [keepLogs(input, 'qwen-tmp', `${input.homeDir}/.qwen/tmp`)],
    })
  },
}
