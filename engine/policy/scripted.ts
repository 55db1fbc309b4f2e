/**
 * @module engine/policy/scripted
 * The default stand-in agent: works with any coding harness. It reads the latest user query
 * for a file-creation instruction (default: `hello.txt` containing `hi`), finds a tool able to
 * create the file by its schema, and emits one valid call; once the tool result is back it
 * answers with a short confirmation. Side calls without tools get a short text, structured
 * output requests a minimal schema-valid JSON object.
 */

import type { TemplateMessage } from '../chat-template-input.ts'
import type { Rng } from '../rng.ts'
import { assistantText } from './assistant-text.ts'
import {
  DEFAULT_INSTRUCTION,
  type FileInstruction,
  findWorkingDirectory,
  isToolResponseText,
  joinPath,
  latestQueryIndex,
  parseFileInstruction,
} from './instruction.ts'
import { sampleJsonForSchema } from './json-schema-sample.ts'
import type { Policy, PolicyInput, PolicyOutput } from './policy.ts'
import { type FileTool, findFileTool, properties } from './tool-detect.ts'

export function createScriptedPolicy(): Policy {
  return { name: 'scripted', generate: generateScripted }
}

function generateScripted(input: PolicyInput): PolicyOutput {
  const { messages, tools, enableThinking, responseFormat, rng } = input
  const queryIndex = latestQueryIndex(messages)
  const query = messages[queryIndex]?.content ?? ''
  const instruction = parseFileInstruction(query) ?? DEFAULT_INSTRUCTION

  if (responseFormat !== null && responseFormat.type !== 'text') {
    const value = sampleJsonForSchema(responseFormat.schema ?? { type: 'object' }, {
      title: titleFor(instruction),
    })
    return {
      text: assistantText({
        enableThinking,
        reasoning: 'The caller wants a JSON object matching its schema; a minimal one will do.',
        content: JSON.stringify(value),
      }),
    }
  }

  const previousCall = lastToolCallAfter(messages, queryIndex)
  const last = messages.at(-1)
  if (previousCall !== null && last !== undefined && isToolResult(last)) {
    return {
      text: assistantText({
        enableThinking,
        reasoning: rng.pick([
          `The ${previousCall} call finished, so ${instruction.path} is written. I'll confirm.`,
          `${previousCall} returned. The file should now contain "${instruction.content}".`,
        ]),
        content: `Created ${instruction.path} containing "${instruction.content}".`,
      }),
    }
  }

  if (tools.length === 0) return { text: sideCallText(messages, instruction, enableThinking) }

  const tool = findFileTool(tools)
  if (tool === null) {
    return {
      text: assistantText({
        enableThinking,
        reasoning: 'None of the offered tools can write a file.',
        content: `I don't have a tool that can create ${instruction.path}; it should contain "${instruction.content}".`,
      }),
    }
  }
  const call = buildCall(tool, instruction, messages)
  return {
    text: assistantText({
      enableThinking,
      reasoning: reasoningForCall(rng, instruction, tool.tool.name),
      toolCalls: [call],
    }),
  }
}

function reasoningForCall(rng: Rng, instruction: FileInstruction, toolName: string): string {
  return rng.pick([
    `The user wants ${instruction.path} to contain "${instruction.content}". I'll use the ${toolName} tool.`,
    `I need to create ${instruction.path} with the content "${instruction.content}". ${toolName} can do that.`,
    `Task: write "${instruction.content}" into ${instruction.path}. Calling ${toolName}.`,
  ])
}

function isToolResult(message: TemplateMessage): boolean {
  return message.role === 'tool' || (message.role === 'user' && isToolResponseText(message.content))
}

/** Name of the latest tool call made after the current query, or `null`. */
function lastToolCallAfter(messages: readonly TemplateMessage[], queryIndex: number): string | null {
  for (let index = messages.length - 1; index > queryIndex; index--) {
    const calls = messages[index]?.tool_calls
    const name = calls?.at(-1)?.function.name
    if (messages[index]?.role === 'assistant' && name !== undefined) return name
  }
  return null
}

function titleFor(instruction: FileInstruction): string {
  return `Create ${instruction.path}`
}

function sideCallText(messages: readonly TemplateMessage[], instruction: FileInstruction, enableThinking: boolean): string {
  const everything = messages.map((message) => message.content).join('\n')
  let content: string
  if (/\btitle\b/i.test(everything)) content = titleFor(instruction)
  else if (/\bjson\b/i.test(everything)) content = '{}'
  else content = `${instruction.path} should contain "${instruction.content}".`
  return assistantText({ enableThinking, reasoning: 'A short answer is enough here.', content })
}

function buildCall(
  tool: FileTool,
  instruction: FileInstruction,
  messages: readonly TemplateMessage[],
): { name: string; arguments: Record<string, unknown> } {
  const args: Record<string, unknown> = {}
  switch (tool.kind) {
    case 'write': {
      const directory = tool.absolutePath ? findWorkingDirectory(messages) : null
      args[tool.pathKey] = directory === null ? instruction.path : joinPath(directory, instruction.path)
      args[tool.contentKey] = instruction.content
      break
    }
    case 'shell': {
      const command = `printf '%s' ${shellQuote(instruction.content)} > ${shellQuote(instruction.path)}`
      args[tool.commandKey] = tool.argv ? ['bash', '-lc', command] : command
      break
    }
    case 'patch': {
      const lines = instruction.content.split('\n').map((line) => `+${line}`)
      args[tool.inputKey] = ['*** Begin Patch', `*** Add File: ${instruction.path}`, ...lines, '*** End Patch'].join('\n')
      break
    }
  }
  fillRequired(tool, args, instruction)
  return { name: tool.tool.name, arguments: args }
}

/** Gives every other required parameter a schema-valid value (e.g. a `description`). */
function fillRequired(tool: FileTool, args: Record<string, unknown>, instruction: FileInstruction) {
  const schema = tool.tool.parameters
  if (schema === null || !Array.isArray(schema.required)) return
  const props = properties(schema)
  for (const key of schema.required) {
    if (typeof key !== 'string' || key in args) continue
    args[key] = /description|justification|reason/i.test(key)
      ? `Create ${instruction.path}`
      : sampleJsonForSchema(props[key] ?? {}, { title: titleFor(instruction) })
  }
}

function shellQuote(text: string): string {
  return /^[\w./-]+$/.test(text) ? text : `'${text.replaceAll("'", `'\\''`)}'`
}
