/**
 * @module engine/policy/tool-detect
 * Finds a way to create a file among whatever tools a harness offers, by JSON schema rather
 * than by name (names vary: `Write`, `write_file`, `write`, `create_file`; `Bash`,
 * `exec_command`, `run_shell_command`; Codex's freeform `apply_patch`).
 */

import { isRecord } from '../chat-template-input.ts'
import type { JsonSchema, ToolSpec } from './policy.ts'

const PATH_KEYS = ['file_path', 'path', 'filePath', 'absolute_path', 'filepath', 'filename', 'file_name', 'file', 'target_file']
const CONTENT_KEYS = ['content', 'contents', 'text', 'file_text', 'new_content', 'data', 'body']
const SHELL_KEYS = ['command', 'cmd', 'script']
const WRITE_NAME = /write|create|save|new_file/i
const SHELL_NAME = /bash|shell|exec|command|terminal|run/i
const PATCH_NAME = /apply_patch|patch/i

export interface WriteTool {
  kind: 'write'
  tool: ToolSpec
  pathKey: string
  contentKey: string
  /** The schema asks for absolute paths. */
  absolutePath: boolean
}

export interface ShellTool {
  kind: 'shell'
  tool: ToolSpec
  commandKey: string
  /** `command` is an argv array (`["bash", "-lc", …]`). */
  argv: boolean
}

export interface PatchTool {
  kind: 'patch'
  tool: ToolSpec
  /** Argument carrying the patch text (`input` for freeform tools). */
  inputKey: string
}

export type FileTool = WriteTool | ShellTool | PatchTool

/** Best file-creating tool: a write tool, else a shell tool, else an apply_patch tool. */
export function findFileTool(tools: readonly ToolSpec[]): FileTool | null {
  return findWriteTool(tools) ?? findShellTool(tools) ?? findPatchTool(tools)
}

export function properties(schema: JsonSchema | null): Record<string, JsonSchema> {
  if (schema === null || !isRecord(schema.properties)) return {}
  const result: Record<string, JsonSchema> = {}
  for (const [name, value] of Object.entries(schema.properties)) {
    result[name] = isRecord(value) ? value : {}
  }
  return result
}

export function isStringSchema(schema: JsonSchema | undefined): boolean {
  if (schema === undefined) return false
  const type = schema.type
  if (type === undefined) return true
  if (Array.isArray(type)) return type.some((entry) => String(entry).toLowerCase() === 'string')
  return String(type).toLowerCase() === 'string'
}

function isStringArraySchema(schema: JsonSchema | undefined): boolean {
  return schema !== undefined && String(schema.type).toLowerCase() === 'array'
}

function preferByName<T extends { tool: ToolSpec }>(candidates: T[], pattern: RegExp): T | null {
  return candidates.find((candidate) => pattern.test(candidate.tool.name)) ?? candidates[0] ?? null
}

function findWriteTool(tools: readonly ToolSpec[]): WriteTool | null {
  const candidates: WriteTool[] = []
  for (const tool of tools) {
    if (tool.freeform) continue
    const props = properties(tool.parameters)
    const pathKey = PATH_KEYS.find((key) => isStringSchema(props[key]))
    const contentKey = CONTENT_KEYS.find((key) => isStringSchema(props[key]))
    if (pathKey === undefined || contentKey === undefined) continue
    const pathDescription = typeof props[pathKey]?.description === 'string' ? props[pathKey].description : ''
    const absolutePath = /\babsolute\b/i.test(`${tool.description}\n${String(pathDescription)}`)
    candidates.push({ kind: 'write', tool, pathKey, contentKey, absolutePath })
  }
  return preferByName(candidates, WRITE_NAME)
}

export function findShellTool(tools: readonly ToolSpec[]): ShellTool | null {
  const candidates: ShellTool[] = []
  for (const tool of tools) {
    if (tool.freeform) continue
    const props = properties(tool.parameters)
    for (const key of SHELL_KEYS) {
      if (isStringSchema(props[key])) {
        candidates.push({ kind: 'shell', tool, commandKey: key, argv: false })
        break
      }
      if (key === 'command' && isStringArraySchema(props[key])) {
        candidates.push({ kind: 'shell', tool, commandKey: key, argv: true })
        break
      }
    }
  }
  return preferByName(candidates, SHELL_NAME)
}

export function findPatchTool(tools: readonly ToolSpec[]): PatchTool | null {
  for (const tool of tools) {
    const mentionsPatch = PATCH_NAME.test(tool.name) || /\bpatch\b/i.test(tool.description)
    if (!mentionsPatch) continue
    if (tool.freeform || tool.parameters === null) return { kind: 'patch', tool, inputKey: 'input' }
    const props = properties(tool.parameters)
    const required = Array.isArray(tool.parameters.required) ? tool.parameters.required : []
    const stringKeys = Object.keys(props).filter((key) => isStringSchema(props[key]))
    const inputKey =
      stringKeys.find((key) => required.includes(key)) ?? stringKeys.find((key) => /input|patch|content/i.test(key)) ?? stringKeys[0]
    if (inputKey !== undefined) return { kind: 'patch', tool, inputKey }
  }
  return null
}
