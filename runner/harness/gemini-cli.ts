/**
 * @module
 * Gemini CLI (`gemini -p`), Gemini `v1beta`. `GOOGLE_GEMINI_BASE_URL` is the bare origin, the token goes
 * as `GEMINI_API_KEY` (→ `x-goog-api-key`); the auth type is pinned in `settings.json` (auto-detection
 * breaks with a custom base URL), auto-update, usage statistics and telemetry off, workspace trusted.
 * Without a model name the CLI first calls its router classifier (a non-streamed side call).
 */
import { cli, commonEnv, finishPlan, jsonFile, keepLogs, rejectUnsupported, resolveModel, resolveVariant, shellJoin } from './common.ts'
import type { Harness } from './harness.ts'

export const geminiCli: Harness = {
  name: 'gemini_cli',
  pkg: { name: '@google/gemini-cli', version: '0.61.0', bin: 'gemini', approxBytes: 100e6 },
  variants: [{ id: 'gemini-cli', api: 'google', description: 'generateContent / streamGenerateContent', defaultModel: null }],
  render(input) {
    rejectUnsupported('gemini_cli', input)
    const variant = resolveVariant(geminiCli, input.variant)
    const model = resolveModel(input, variant)
    const args = ['-p', input.instruction, '--approval-mode=yolo', ...(model !== null ? ['-m', model] : [])]
    return finishPlan(input, {
      files: [
        jsonFile(`${input.homeDir}/.gemini/settings.json`, {
          general: { enableAutoUpdate: false, enableAutoUpdateNotification: false },
          privacy: { usageStatisticsEnabled: false },
          telemetry: { enabled: false },
          security: { auth: { selectedType: 'gemini-api-key' }, folderTrust: { enabled: false } },
        }),
      ],
      env: {
        ...commonEnv(input),
        GEMINI_API_KEY: input.token,
        GOOGLE_GEMINI_BASE_URL: input.edgeUrl,
        GEMINI_TELEMETRY_ENABLED: 'false',
        GEMINI_CLI_TRUST_WORKSPACE: 'true',
      },
      steps: [{ name: 'gemini', command: `${cli(input, 'gemini')} ${shellJoin(args)} </dev/null`, cwd: input.workDir }],
      postrunSteps: [keepLogs(input, 'gemini-tmp', `${input.homeDir}/.gemini/tmp`)],
    })
  },
}
