/**
 * @module
 * The harness contract: one module per harness (`runner/harness/<name>.ts`: codex, claude_code,
 * gemini_cli, qwen_code, opencode, pi, shell), used by the runner AND by
 * `scripts/record-harness-fixtures.ts` (single source of truth). A harness only renders files, env and
 * commands; the runtime runs them.
 */
import type { AgentSpec } from '../../src/contract/rollout.ts'

/** Which model API the harness speaks in a variant. */
export type HarnessApi = 'openai-chat' | 'openai-responses' | 'anthropic' | 'google'

export interface HarnessVariant {
  /** e.g. `opencode-anthropic`; unique across harnesses. */
  id: string
  api: HarnessApi
  /** What this variant changes (wire, provider package, mode). */
  description: string
  /**
   * Model name the harness asks for when neither the input nor the agent spec names one (the edge maps any
   * name to the served model); null = the CLI's own default.
   */
  defaultModel: string | null
}

/** A pinned npm CLI. */
export interface HarnessPackage {
  name: string
  version: string
  /** Executable name under `node_modules/.bin`. */
  bin: string
  /** Size on disk once installed (bytes, approximate): the install progress bar's total. */
  approxBytes?: number
}

export interface HarnessInput {
  instruction: string
  /** Base URL of the edge as seen from inside the runtime (the forwarded port), without a trailing slash. */
  edgeUrl: string
  /** The session token (the harness's API key). */
  token: string
  /**
   * Model name the harness asks for. Default: `agent.model_name`, else the variant's `defaultModel`
   * (the edge rewrites it to the served model either way).
   */
  model?: string | null
  /** The agent spec from the task (settings, env, mcp_servers, custom_shell, …). */
  agent: AgentSpec
  /** Variant id; default = the harness's first variant. */
  variant?: string
  /**
   * Inside-runtime path of the CLI's executable (from `install.ts`, mounted into the runtime); default:
   * the bare bin name, found on PATH (an image with the CLI installed globally).
   */
  cliPath?: string
  /** Inside-runtime paths. */
  sessionDir: string
  homeDir: string
  workDir: string
}

export interface RenderedFile {
  /** Absolute path inside the runtime. */
  path: string
  content: string
  mode?: number
}

export interface HarnessStep {
  /** Log name: output teed to `<sessionDir>/logs/agent/<name>.{stdout,stderr}.log`. */
  name: string
  command: string
  env?: Record<string, string>
  cwd?: string
}

export interface HarnessPlan {
  files: RenderedFile[]
  /** Environment for every step (base URL + key, telemetry/update/auto-compaction switches, HOME, …). */
  env: Record<string, string>
  /** Non-interactive commands, run in order. */
  steps: HarnessStep[]
  /** Teardown (copy the CLI's own session logs into the log dir, …). */
  postrunSteps: HarnessStep[]
}

export interface Harness {
  /** Registry name as in `AgentSpec.harness`. */
  name: string
  /** npm package and pinned version of the CLI (null for `shell`). */
  pkg: HarnessPackage | null
  variants: HarnessVariant[]
  render(input: HarnessInput): HarnessPlan
}
