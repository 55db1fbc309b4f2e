/**
 * @module
 * Small helpers the harness modules share: POSIX shell quoting, variant and model resolution (also for CLIs
 * whose variants differ only by the provider their config names), JSON config files, the environment every
 * CLI gets, and the teardown step that keeps a CLI's own session logs.
 */
import type { Harness, HarnessApi, HarnessInput, HarnessPlan, HarnessStep, HarnessVariant, RenderedFile } from './harness.ts'

/** Bad harness input (unknown variant, unsupported option): the runner reports it as the session's error. */
export class HarnessConfigError extends Error {
  override name = 'HarnessConfigError'
}

/** One POSIX shell word: bare when it is safe, else single-quoted (`'` → `'\''`). */
export function shellQuote(word: string): string {
  if (/^[A-Za-z0-9_@%+=:,./-]+$/.test(word)) return word
  return `'${word.replaceAll("'", `'\\''`)}'`
}

export function shellJoin(words: string[]): string {
  return words.map(shellQuote).join(' ')
}

export function resolveVariant(harness: Pick<Harness, 'name' | 'variants'>, id: string | undefined): HarnessVariant {
  if (id === undefined) return harness.variants[0]!
  const variant = harness.variants.find((candidate) => candidate.id === id)
  if (!variant)
    throw new HarnessConfigError(
      `harness ${harness.name} has no variant ${JSON.stringify(id)} (known: ${harness.variants.map((v) => v.id).join(', ')})`,
    )
  return variant
}

/** Model the harness asks for: the input's, else the agent spec's, else the variant default (null: CLI default). */
export function resolveModel(input: HarnessInput, variant: HarnessVariant): string | null {
  return input.model ?? input.agent.model_name ?? variant.defaultModel
}

/** One variant of a CLI whose config picks the wire by a provider name and a base URL (opencode, pi). */
export interface ProviderWire {
  id: string
  api: HarnessApi
  /** What the CLI's config names for this wire (an SDK package, an API kind); also the variant's description. */
  provider: string
  /** Appended to the edge URL to make the provider's base URL (`/v1`, `/v1beta`, or nothing). */
  baseSuffix: string
}

/** The variants of such a CLI, in the order of `wires` (the first is the default). */
export function providerVariants(wires: readonly ProviderWire[], defaultModel: string): HarnessVariant[] {
  return wires.map(({ id, api, provider }) => ({ id, api, description: provider, defaultModel }))
}

/** Start of such a CLI's render: unsupported options refused, then the variant's wire and the model it asks for. */
export function resolveProviderWire(
  harness: Pick<Harness, 'name' | 'variants'>,
  wires: readonly ProviderWire[],
  input: HarnessInput,
): { wire: ProviderWire; model: string } {
  rejectUnsupported(harness.name, input)
  const variant = resolveVariant(harness, input.variant)
  const wire = wires.find((candidate) => candidate.id === variant.id)
  if (!wire) throw new Error(`harness ${harness.name}: variant ${variant.id} has no provider wire`)
  return { wire, model: resolveModel(input, variant) ?? variant.defaultModel ?? 'test-model' }
}

/** The CLI executable as a shell word. */
export function cli(input: HarnessInput, bin: string): string {
  return shellQuote(input.cliPath ?? bin)
}

export function jsonFile(path: string, value: unknown): RenderedFile {
  return { path, content: `${JSON.stringify(value, null, 2)}\n` }
}

/** Environment every harness gets: its own HOME, no colours or update notices from Node tooling. */
export function commonEnv(input: HarnessInput): Record<string, string> {
  return { HOME: input.homeDir, TERM: 'dumb', NO_COLOR: '1', NO_UPDATE_NOTIFIER: '1' }
}

export function agentLogDir(input: HarnessInput): string {
  return `${input.sessionDir}/logs/agent`
}

/** Teardown step: copy a CLI's own session/log folder into the agent log dir (nothing to copy is fine). */
export function keepLogs(input: HarnessInput, name: string, from: string): HarnessStep {
  const to = `${agentLogDir(input)}/${name}`
  return { name: `keep-${name}`, command: `if [ -e ${shellQuote(from)} ]; then cp -r ${shellQuote(from)} ${shellQuote(to)}; fi` }
}

/** Reject options a module does not render (never ignore them silently). */
export function rejectUnsupported(harness: string, input: HarnessInput): void {
  if (input.agent.mcp_servers.length > 0)
    throw new HarnessConfigError(`harness ${harness}: mcp_servers are not rendered by this module yet`)
  if (input.agent.skills_path !== null) throw new HarnessConfigError(`harness ${harness}: skills_path is not supported`)
}

/** Merge the agent spec's env (applied to run and teardown, Polar §2.2) last, so it wins. */
export function finishPlan(input: HarnessInput, plan: HarnessPlan): HarnessPlan {
  return { ...plan, env: { ...plan.env, ...input.agent.env } }
}
