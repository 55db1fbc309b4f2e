/**
 * @module
 * Claude Code (`claude -p`), Anthropic Messages. Base URL without `/v1`, the token as `ANTHROPIC_API_KEY`
 * (→ `x-api-key`), `IS_SANDBOX=1` so skip-permissions works as root, updater/telemetry/error reporting off.
 * `claude-code` also turns non-essential traffic off (no title call); `claude-code-nonessential` leaves it
 * on (a `HEAD` probe and a title side call). A model name pins main, side and sub-agent models alike.
 */
import { cli, commonEnv, finishPlan, keepLogs, rejectUnsupported, resolveModel, resolveVariant, shellJoin } from './common.ts'
import type { Harness } from './harness.ts'

export const claudeCode: Harness = {
  name: 'claude_code',
  pkg: { name: '@anthropic-ai/claude-code', version: '2.1.330', bin: 'claude', approxBytes: 235e6 },
  variants: [
    { id: 'claude-code', api: 'anthropic', description: 'non-essential traffic off', defaultModel: null },
    {
      id: 'claude-code-nonessential',
      api: 'anthropic',
      description: 'non-essential traffic on (connectivity probe, title call)',
      defaultModel: null,
    },
  ],
  render(input) {
    rejectUnsupported('claude_code', input)
    const variant = resolveVariant(claudeCode, input.variant)
    const model = resolveModel(input, variant)
    const env: Record<string, string> = {
      ...commonEnv(input),
      ANTHROPIC_BASE_URL: input.edgeUrl,
      ANTHROPIC_API_KEY: input.token,
      IS_SANDBOX: '1',
      ...(variant.id === 'claude-code' ? { CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1' } : {}),
      DISABLE_AUTOUPDATER: '1',
      DISABLE_TELEMETRY: '1',
      DISABLE_ERROR_REPORTING: '1',
    }
    if (model !== null)
      Object.assign(env, {
        ANTHROPIC_MODEL: model,
        ANTHROPIC_DEFAULT_SONNET_MODEL: model,
        ANTHROPIC_DEFAULT_OPUS_MODEL: model,
        ANTHROPIC_DEFAULT_HAIKU_MODEL: model,
        CLAUDE_CODE_SUBAGENT_MODEL: model,
      })
    const args = ['-p', input.instruction, '--dangerously-skip-permissions', ...(model !== null ? ['--model', model] : [])]
    return finishPlan(input, {
      files: [],
      env,
      steps: [{ name: 'claude', command: `${cli(input, 'claude')} ${shellJoin(args)} </dev/null`, cwd: input.workDir }],
      postrunSteps: [keepLogs(input, 'claude-projects', `${input.homeDir}/.claude/projects`)],
    })
  },
}
