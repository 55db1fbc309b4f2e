/**
 * @module
 * What an agent saw and answered in one session, read back from the edge's completion log: every model
 * call's answer (text, tool calls, finish reason) and the messages of the last request (the tool results
 * the agent had in front of it when it stopped). `rollgate generate-sft` writes it for each rejected
 * attempt, so a rejection says why without re-running anything.
 */
import { readdir, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import type { EdgeClient } from './edge-client.ts'

/** Longest text kept per message or answer (head and tail are kept around a cut). */
const MAX_TEXT = 4000

export interface TranscriptCall {
  seq: number
  /** Messages and tools the request carried (a side call, e.g. a title or a check, has no tools). */
  request_messages: number
  request_tools: number
  status: string
  finish_reason: string | null
  error: string | null
  content: string | null
  reasoning: string | null
  tool_calls: Array<{ name: string; arguments: string }>
}

export interface AttemptTranscript {
  session_id: string
  /** Tails of the harness's own logs (`logs/agent/*.log` on the runner: its stdout and stderr), when the runner is local. */
  agent_logs: Record<string, string>
  calls: TranscriptCall[]
  /**
   * Messages of the session's last model request that offered tools (the agent's last turn; else the last
   * request), as the harness sent them, long texts cut in the middle.
   */
  last_request_messages: Array<{ role: string; content: string; tool_calls?: Array<{ name: string; arguments: string }> }>
}

export function clip(text: string, max = MAX_TEXT): string {
  if (text.length <= max) return text
  const half = Math.floor(max / 2)
  return `${text.slice(0, half)}\n… [${text.length - 2 * half} characters cut] …\n${text.slice(-half)}`
}

function textOf(content: unknown): string {
  if (typeof content === 'string') return content
  if (Array.isArray(content)) {
    return content
      .map((part) =>
        typeof part === 'object' && part !== null && 'text' in part ? String((part as { text: unknown }).text) : JSON.stringify(part),
      )
      .join('')
  }
  return content === null || content === undefined ? '' : JSON.stringify(content)
}

function toolCalls(value: unknown): Array<{ name: string; arguments: string }> {
  if (!Array.isArray(value)) return []
  return value.map((call) => {
    const fn = (call as { function?: { name?: unknown; arguments?: unknown } }).function ?? {}
    const args = typeof fn.arguments === 'string' ? fn.arguments : JSON.stringify(fn.arguments ?? null)
    return { name: String(fn.name ?? ''), arguments: clip(args) }
  })
}

/** Tails of the `*.log` files in a runner session's `logs/agent/` (none when the directory is not there). */
export async function readAgentLogs(sessionDir: string): Promise<Record<string, string>> {
  const dir = join(sessionDir, 'logs', 'agent')
  const names = await readdir(dir).catch(() => [] as string[])
  const logs: Record<string, string> = {}
  for (const name of names.filter((entry) => entry.endsWith('.log')).sort()) {
    const text = await readFile(join(dir, name), 'utf8').catch(() => null)
    if (text !== null) logs[name] = text.length > MAX_TEXT ? `… ${text.slice(-MAX_TEXT)}` : text
  }
  return logs
}

/**
 * The transcript of `sessionId` from the edge's completion records (normalized requests and answers), with
 * the harness's log tails when its runner session directory is on this machine.
 */
export async function readAttemptTranscript(
  client: EdgeClient,
  sessionId: string,
  sessionDir: string | null = null,
): Promise<AttemptTranscript> {
  const calls: TranscriptCall[] = []
  let lastRequest: Record<string, unknown> | null = null
  for await (const record of client.completions(sessionId)) {
    const message = (record.response_message ?? null) as Record<string, unknown> | null
    const request = (record.request as Record<string, unknown> | undefined) ?? {}
    calls.push({
      seq: Number(record.seq),
      request_messages: Array.isArray(request.messages) ? request.messages.length : 0,
      request_tools: Array.isArray(request.tools) ? request.tools.length : 0,
      status: String(record.status),
      finish_reason: (record.finish_reason as string | null) ?? null,
      error: (record.error as string | null) ?? null,
      content: message === null ? null : clip(textOf(message.content)),
      reasoning: typeof message?.reasoning_content === 'string' ? clip(message.reasoning_content) : null,
      tool_calls: toolCalls(message?.tool_calls),
    })
    // The agent's own last turn: a later side call (no tools) does not hide it.
    if (lastRequest === null || Array.isArray(request.tools) || !Array.isArray(lastRequest.tools)) lastRequest = request
  }
  const messages = Array.isArray(lastRequest?.messages) ? (lastRequest.messages as Array<Record<string, unknown>>) : []
  return {
    session_id: sessionId,
    agent_logs: sessionDir === null ? {} : await readAgentLogs(sessionDir),
    calls,
    last_request_messages: messages.map((message) => {
      const calls = toolCalls(message.tool_calls)
      // The harness's system prompt is long and always the same: its head says which one it was.
      const content = clip(textOf(message.content), message.role === 'system' ? 600 : MAX_TEXT)
      return { role: String(message.role), content, ...(calls.length > 0 ? { tool_calls: calls } : {}) }
    }),
  }
}
