/**
 * @module
 * The harness names a task may ask for (`AgentSpec.harness`, Polar's names). The runner's registry
 * (`runner/harness/index.ts`, one module per harness) is typed by this list, so the compiler keeps the two
 * equal; the edge checks a submitted name against it (400 naming the known ones) instead of letting the
 * runner fail the session at INIT.
 */
export const HARNESS_NAMES = ['codex', 'claude_code', 'gemini_cli', 'qwen_code', 'opencode', 'pi', 'shell'] as const
export type HarnessName = (typeof HARNESS_NAMES)[number]

export function isHarnessName(name: string): name is HarnessName {
  return (HARNESS_NAMES as readonly string[]).includes(name)
}
