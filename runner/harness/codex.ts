/**
 * @module
 * Codex CLI (`codex exec`), OpenAI Responses only. `codex`: a custom Responses provider in
 * `$CODEX_HOME/config.toml` (key in `ROLLGATE_API_KEY`); `codex-builtin`: the built-in OpenAI provider with
 * `openai_base_url` and `CODEX_API_KEY` (it first tries a Responses WebSocket, which the edge answers 426).
 * Update check, analytics and feedback off. `CODEX_HOME` must not be under the system temp dir (Codex then
 * refuses its helper binaries), so it lives in the harness HOME.
 */
import { cli, commonEnv, finishPlan, keepLogs, rejectUnsupported, resolveModel, resolveVariant, shellJoin } from './common.ts'
import type { Harness } from './harness.ts'

/** TOML basic string (JSON string escaping is valid TOML for these values). */
const toml = (value: string) => JSON.stringify(value)

export const codex: Harness = {
  name: 'codex',
  pkg: { name: '@openai/codex', version: '0.169.0', bin: 'codex', approxBytes: 404e6 },
  variants: [
    { id: 'codex', api: 'openai-responses', description: 'custom Responses provider (config.toml)', defaultModel: 'gpt-5.5' },
    {
      id: 'codex-builtin',
      api: 'openai-responses',
      description: 'built-in OpenAI provider with openai_base_url (WebSocket attempt first)',
      defaultModel: 'gpt-5.5',
    },
  ],
  render(input) {
    rejectUnsupported('codex', input)
    const variant = resolveVariant(codex, input.variant)
    const builtin = variant.id === 'codex-builtin'
    const model = resolveModel(input, variant) ?? 'gpt-5.5'
    const codexHome = `${input.homeDir}/.codex`
    // Top-level keys must precede the first [table] (else TOML reads them as the table's keys).
    const top = [
      `model = ${toml(model)}`,
      ...(builtin ? [`openai_base_url = ${toml(`${input.edgeUrl}/v1`)}`] : ['model_provider = "rollgate"']),
      'approval_policy = "never"',
      'sandbox_mode = "danger-full-access"',
      'check_for_update_on_startup = false',
    ]
    const tables = ['[analytics]', 'enabled = false', '', '[feedback]', 'enabled = false']
    const provider = builtin
      ? []
      : [
          '',
          '[model_providers.rollgate]',
          'name = "Rollgate"',
          `base_url = ${toml(`${input.edgeUrl}/v1`)}`,
          'env_key = "ROLLGATE_API_KEY"',
          'wire_api = "responses"',
        ]
    return finishPlan(input, {
      files: [{ path: `${codexHome}/config.toml`, content: [...top, '', ...tables, ...provider, ''].join('\n') }],
      env: { ...commonEnv(input), CODEX_HOME: codexHome, [builtin ? 'CODEX_API_KEY' : 'ROLLGATE_API_KEY']: input.token },
      steps: [
        {
          name: 'codex',
          command: `${cli(input, 'codex')} ${shellJoin(['exec', '--skip-git-repo-check', '--dangerously-bypass-approvals-and-sandbox', input.instruction])} </dev/null`,
          cwd: input.workDir,
        },
      ],
      postrunSteps: [keepLogs(input, 'codex-sessions', `${codexHome}/sessions`)],
    })
  },
}
