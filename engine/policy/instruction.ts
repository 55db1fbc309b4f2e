/**
 * @module engine/policy/instruction
 * Reads the task out of a conversation: a file-creation instruction from the latest user query
 * (`create hello.txt containing hi`, `write "hi" to notes.md`, …) and the harness's working
 * directory from its system prompt / environment blocks (`Working directory: /x`,
 * `<cwd>/x</cwd>`, `I'm currently working in the directory: /x`, …).
 */

import type { TemplateMessage } from '../chat-template-input.ts'

export interface FileInstruction {
  path: string
  content: string
}

export const DEFAULT_INSTRUCTION: FileInstruction = { path: 'hello.txt', content: 'hi' }

const PATH = String.raw`[\`'"]?((?:~|\.{1,2})?\/?[\w.\-/]*\w)[\`'"]?`
const CREATE_PATTERN = new RegExp(
  String.raw`\b(?:create|write|make|add|generate|save)\s+(?:a\s+|an\s+|the\s+)?(?:new\s+)?` +
    String.raw`(?:(?:plain\s+)?text\s+)?(?:file\s+)?(?:called\s+|named\s+|at\s+)?${PATH}\s*,?\s+` +
    String.raw`(?:containing|that\s+contains|which\s+contains|with\s+(?:the\s+)?(?:contents|content|text|body)(?:\s+of)?)` +
    String.raw`\s*:?\s*([^\n]+)`,
  'gi',
)
const WRITE_TO_PATTERN = new RegExp(
  String.raw`\b(?:write|put|save)\s+([^\n]+?)\s+(?:to|into|in)\s+(?:a\s+|the\s+)?(?:new\s+)?` +
    String.raw`(?:file\s+)?(?:called\s+|named\s+)?${PATH}`,
  'gi',
)
const CONTENT_PREFIX = /^(?:the\s+)?(?:text|string|word|line|content|contents)\s+/i
const CLOSING_QUOTE: Record<string, string> = { '"': '"', "'": "'", '`': '`', '“': '”', '‘': '’' }

/** The last file-creation instruction in `text`, or `null`. */
export function parseFileInstruction(text: string): FileInstruction | null {
  let found: FileInstruction | null = null
  for (const match of text.matchAll(CREATE_PATTERN)) {
    const instruction = toInstruction(match[1], match[2])
    if (instruction !== null) found = instruction
  }
  if (found !== null) return found
  for (const match of text.matchAll(WRITE_TO_PATTERN)) {
    const instruction = toInstruction(match[2], match[1])
    if (instruction !== null) found = instruction
  }
  return found
}

function toInstruction(path: string | undefined, rawContent: string | undefined): FileInstruction | null {
  if (path === undefined || rawContent === undefined) return null
  // A bare word ("file", "it") is not a file name; require an extension or a directory.
  if (!/[./]/.test(path)) return null
  return { path, content: cleanContent(rawContent) }
}

function cleanContent(raw: string): string {
  const text = raw.trim().replace(CONTENT_PREFIX, '')
  const opening = text.charAt(0)
  const closing = CLOSING_QUOTE[opening]
  if (closing !== undefined) {
    const end = text.indexOf(closing, 1)
    if (end > 0) return text.slice(1, end)
  }
  return text
    .replace(/\s+(?:and\s+nothing\s+else|please|then\s+stop)\b.*$/i, '')
    .replace(/[.!?;,]+$/, '')
    .trim()
}

const WORKDIR_PATTERNS: RegExp[] = [
  /Working directory:\s*[`'"]?(\/[^\s<>"'`]*)/i,
  /<cwd>\s*(\/[^<\s]*)\s*<\/cwd>/i,
  /current working directory(?:\s+is)?:?\s*[`'"]?(\/[^\s<>"'`]*)/i,
  /working in the directory:?\s*[`'"]?(\/[^\s<>"'`]*)/i,
  /\bcwd\b["']?\s*[:=]\s*["']?(\/[^\s"'<>,}]*)/i,
]

/** The working directory a harness announced, searching system messages first. */
export function findWorkingDirectory(messages: readonly TemplateMessage[]): string | null {
  const ordered = [
    ...messages.filter((message) => message.role === 'system' || message.role === 'developer'),
    ...messages.filter((message) => message.role !== 'system' && message.role !== 'developer'),
  ]
  for (const message of ordered) {
    for (const pattern of WORKDIR_PATTERNS) {
      const match = pattern.exec(message.content)
      const directory = match?.[1]?.replace(/[.,;:)\]]+$/, '')
      if (directory) return directory
    }
  }
  return null
}

/** Index of the latest real user query (tool results wrapped as user turns do not count). */
export function latestQueryIndex(messages: readonly TemplateMessage[]): number {
  for (let index = messages.length - 1; index >= 0; index--) {
    const message = messages[index]
    if (message?.role === 'user' && !isToolResponseText(message.content)) return index
  }
  return -1
}

export function isToolResponseText(content: string): boolean {
  const trimmed = content.trim()
  return trimmed.startsWith('<tool_response>') && trimmed.endsWith('</tool_response>')
}

export function joinPath(directory: string, path: string): string {
  if (path.startsWith('/')) return path
  const relative = path.replace(/^\.\//, '')
  return `${directory.replace(/\/+$/, '')}/${relative}`
}
