/**
 * @module engine/policy/agent-tools
 * Discovers, by JSON schema rather than by name, the tools a coding agent needs to work on a
 * repository: a shell, a file reader, an in-place editor (old/new string replacement, pi's
 * `edits[]` list, or Codex's `apply_patch`) and a sub-agent launcher (Claude Code's `Agent`/`Task`,
 * opencode's `task`, Qwen Code's `agent`, Gemini CLI's `invoke_agent`) and, for sub-agents, the tool
 * that hands the answer back (Gemini CLI's `complete_task`). Each harness names and
 * shapes these differently; the policy only sees what is discovered here.
 */

import { isRecord } from '../chat-template-input.ts'
import type { JsonSchema, ToolSpec } from './policy.ts'
import { findPatchTool, findShellTool, isStringSchema, type PatchTool, properties, type ShellTool } from './tool-detect.ts'

const PATH_KEYS = ['file_path', 'filePath', 'path', 'absolute_path', 'filepath', 'filename', 'file', 'target_file']
const OLD_KEYS = ['old_string', 'oldString', 'old_str', 'old_text', 'oldText', 'search', 'find']
const NEW_KEYS = ['new_string', 'newString', 'new_str', 'new_text', 'newText', 'replace', 'replacement']
const CONTENT_KEYS = ['content', 'contents', 'text', 'file_text', 'new_content', 'data', 'body']
const READ_NAME = /read|view|cat|open/i
const NOT_A_FILE_READER = /image|notebook|background|stdin|mcp|url|web/i
const DELEGATE_NAME = /^(?:task|agent|invoke_agent|dispatch_agent|spawn_agent|subagent)$/i
/** Sub-agent types a generic delegation should pick, best first. */
const SUBAGENT_TYPES = ['general-purpose', 'general', 'generalist', 'codebase_investigator', 'explore']

export interface ReadTool {
  tool: ToolSpec
  pathKey: string
}

export type EditTool =
  | { kind: 'replace'; tool: ToolSpec; pathKey: string; oldKey: string; newKey: string }
  | { kind: 'edits'; tool: ToolSpec; pathKey: string; editsKey: string; oldKey: string; newKey: string }
  | { kind: 'patch'; tool: ToolSpec; inputKey: string }

export interface DelegateTool {
  tool: ToolSpec
  promptKey: string
}

/** A tool a (sub-)agent must call to hand its answer back (Gemini CLI sub-agents' `complete_task`). */
export interface CompleteTool {
  tool: ToolSpec
}

export interface AgentTools {
  shell: ShellTool | null
  read: ReadTool | null
  edit: EditTool | null
  delegate: DelegateTool | null
  complete: CompleteTool | null
}

export function findAgentTools(tools: readonly ToolSpec[]): AgentTools {
  return {
    shell: findShellTool(tools.filter((tool) => !DELEGATE_NAME.test(tool.name))),
    read: findReadTool(tools),
    edit: findEditTool(tools),
    delegate: findDelegateTool(tools),
    complete: findCompleteTool(tools),
  }
}

const COMPLETE_NAME = /^(?:complete_task|task_complete|attempt_completion|submit_result|finish_task)$/i

function findCompleteTool(tools: readonly ToolSpec[]): CompleteTool | null {
  const tool = tools.find((candidate) => !candidate.freeform && COMPLETE_NAME.test(candidate.name))
  return tool === undefined ? null : { tool }
}

function firstStringKey(props: Record<string, JsonSchema>, keys: readonly string[]): string | undefined {
  return keys.find((key) => isStringSchema(props[key]) && props[key] !== undefined)
}

function findReadTool(tools: readonly ToolSpec[]): ReadTool | null {
  for (const tool of tools) {
    if (tool.freeform || !READ_NAME.test(tool.name) || NOT_A_FILE_READER.test(tool.name)) continue
    const props = properties(tool.parameters)
    const pathKey = firstStringKey(props, PATH_KEYS)
    // A reader takes a path and writes nothing.
    if (pathKey === undefined || firstStringKey(props, CONTENT_KEYS) !== undefined) continue
    if (firstStringKey(props, OLD_KEYS) !== undefined) continue
    return { tool, pathKey }
  }
  return null
}

function findEditTool(tools: readonly ToolSpec[]): EditTool | null {
  for (const tool of tools) {
    if (tool.freeform) continue
    const props = properties(tool.parameters)
    const pathKey = firstStringKey(props, PATH_KEYS)
    if (pathKey === undefined) continue
    const oldKey = firstStringKey(props, OLD_KEYS)
    const newKey = firstStringKey(props, NEW_KEYS)
    if (oldKey !== undefined && newKey !== undefined) return { kind: 'replace', tool, pathKey, oldKey, newKey }
    for (const [editsKey, schema] of Object.entries(props)) {
      if (String(schema.type).toLowerCase() !== 'array' || !isRecord(schema.items)) continue
      const itemProps = properties(schema.items)
      const itemOld = firstStringKey(itemProps, OLD_KEYS)
      const itemNew = firstStringKey(itemProps, NEW_KEYS)
      if (itemOld !== undefined && itemNew !== undefined) {
        return { kind: 'edits', tool, pathKey, editsKey, oldKey: itemOld, newKey: itemNew }
      }
    }
  }
  const patch: PatchTool | null = findPatchTool(tools)
  return patch === null ? null : { kind: 'patch', tool: patch.tool, inputKey: patch.inputKey }
}

function findDelegateTool(tools: readonly ToolSpec[]): DelegateTool | null {
  for (const tool of tools) {
    if (tool.freeform || !DELEGATE_NAME.test(tool.name)) continue
    const props = properties(tool.parameters)
    if (isStringSchema(props.prompt) && props.prompt !== undefined) return { tool, promptKey: 'prompt' }
  }
  return null
}

/** The sub-agent type (or agent name) to ask for, from the schema's enum or the names the harness advertises. */
export function chooseSubagentType(schema: JsonSchema | undefined, advertised: string): string {
  const options = Array.isArray(schema?.enum) ? schema.enum.map(String) : []
  for (const name of SUBAGENT_TYPES) if (options.includes(name)) return name
  if (options[0] !== undefined) return options[0]
  // Gemini CLI lists its sub-agents as `<subagent><name>…</name>` in the system prompt.
  const listed = [...advertised.matchAll(/<name>([\w-]+)<\/name>/g)].map((match) => match[1] ?? '')
  for (const name of SUBAGENT_TYPES) if (listed.includes(name)) return name
  for (const name of SUBAGENT_TYPES) {
    if (new RegExp(`(?:^|[^\\w-])${name.replace('-', '\\-')}(?:[^\\w-]|$)`).test(advertised)) return name
  }
  return 'general-purpose'
}
