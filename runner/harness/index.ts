/**
 * @module
 * The harness registry under Polar's names (`AgentSpec.harness`): codex, claude_code, gemini_cli,
 * qwen_code, opencode, pi, shell. Used by the runner and by `scripts/record-harness-fixtures.ts`.
 */
import type { HarnessName } from '../../src/contract/harness-names.ts'
import { claudeCode } from './claude-code.ts'
import { codex } from './codex.ts'
import { HarnessConfigError } from './common.ts'
import { geminiCli } from './gemini-cli.ts'
import type { Harness, HarnessVariant } from './harness.ts'
import { opencode } from './opencode.ts'
import { pi } from './pi.ts'
import { qwenCode } from './qwen-code.ts'
import { shell } from './shell.ts'

/** Every name of `HARNESS_NAMES` (the edge's submit check) and no other: `satisfies` makes the compiler check it. */
const REGISTRY = {
  codex,
  claude_code: claudeCode,
  gemini_cli: geminiCli,
  qwen_code: qwenCode,
  opencode,
  pi,
  shell,
} satisfies Record<HarnessName, Harness>

export const HARNESSES: Readonly<Record<string, Harness>> = Object.freeze(REGISTRY)

/** The demo's default: a single JS bundle with no dependencies (installs in seconds), a devDependency. */
export const DEFAULT_HARNESS = 'qwen_code'

export function getHarness(name: string): Harness {
  const harness = HARNESSES[name]
  if (!harness) throw new HarnessConfigError(`unknown harness ${JSON.stringify(name)} (known: ${Object.keys(HARNESSES).join(', ')})`)
  return harness
}

/** Every (harness, variant) pair of the CLIs, in registry order (`shell` excluded: it has no CLI). */
export function cliVariants(): { harness: Harness; variant: HarnessVariant }[] {
  return Object.values(HARNESSES)
    .filter((harness) => harness.pkg !== null)
    .flatMap((harness) => harness.variants.map((variant) => ({ harness, variant })))
}

/** The harness that owns a variant id (`opencode-anthropic` → opencode). */
export function harnessOfVariant(id: string): { harness: Harness; variant: HarnessVariant } {
  const found = cliVariants().find((entry) => entry.variant.id === id)
  if (!found) throw new HarnessConfigError(`unknown harness variant ${JSON.stringify(id)}`)
  return found
}

export { HarnessConfigError }
export type { Harness, HarnessInput, HarnessPlan, HarnessStep, HarnessVariant } from './harness.ts'
