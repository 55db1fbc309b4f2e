/**
 * @module
 * `shell`: Polar's `custom_shell` — the task's own command, with every `{instruction}` replaced by the
 * instruction as one shell-quoted word, run with Polar's injected environment pointed at the edge as seen
 * from inside the runtime (`OPENAI_BASE_URL`/`_API_KEY`, `ANTHROPIC_…`, `GOOGLE_API_URL`/`_KEY`, and
 * `GEMINI_API_KEY`), plus the command's own `env` and `cwd`. Installs nothing.
 */
import { commonEnv, finishPlan, HarnessConfigError, rejectUnsupported, resolveVariant, shellQuote } from './common.ts'
import type { Harness } from './harness.ts'

export const shell: Harness = {
  name: 'shell',
  pkg: null,
  variants: [{ id: 'shell', api: 'openai-chat', description: "the task's custom_shell command", defaultModel: null }],
  render(input) {
    rejectUnsupported('shell', input)
    resolveVariant(shell, input.variant)
    const custom = input.agent.custom_shell
    if (!custom) throw new HarnessConfigError('harness shell requires agent.custom_shell')
    const command = custom.command.replaceAll('{instruction}', shellQuote(input.instruction))
    return finishPlan(input, {
      files: [],
      env: {
        ...commonEnv(input),
        OPENAI_BASE_URL: `${input.edgeUrl}/v1`,
        OPENAI_API_KEY: input.token,
        ANTHROPIC_BASE_URL: input.edgeUrl,
        ANTHROPIC_API_KEY: input.token,
        GOOGLE_API_URL: input.edgeUrl,
        GOOGLE_API_KEY: input.token,
        GEMINI_API_KEY: input.token,
        ...(custom.env ?? {}),
      },
      steps: [{ name: 'shell', command, cwd: custom.cwd ?? input.workDir }],
      postrunSteps: [],
    })
  },
}
