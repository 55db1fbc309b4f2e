import { describe, expect, it } from 'vitest'
import { computeLogprobs } from './logprobs.ts'
import { parseAssistantOutput } from './output-parser.ts'
import { formatPythonNumber, pythonJsonDumps } from './python-json.ts'

describe('pythonJsonDumps', () => {
  it('uses Python separators and keeps non-ASCII', () => {
    expect(pythonJsonDumps({ a: 'é', b: [1, 2, { c: null }], d: true })).toBe('{"a": "é", "b": [1, 2, {"c": null}], "d": true}')
    expect(pythonJsonDumps({})).toBe('{}')
    expect(pythonJsonDumps('line\n"quoted"')).toBe('"line\\n\\"quoted\\""')
  })

  it('formats floats like Python repr', () => {
    expect(formatPythonNumber(0.5)).toBe('0.5')
    expect(formatPythonNumber(0.00001)).toBe('1e-05')
    expect(formatPythonNumber(1.5e16)).toBe('15000000000000000')
    expect(formatPythonNumber(1.25e-7)).toBe('1.25e-07')
    expect(formatPythonNumber(2.5e20 + 0.5)).toBe('250000000000000000000')
  })
})

describe('parseAssistantOutput', () => {
  const call = '<tool_call>\n{"name": "Write", "arguments": {"path": "a.txt", "content": "hi"}}\n</tool_call>'

  it('splits reasoning, content and hermes tool calls', () => {
    const text = `<think>\nplan\n</think>\n\nSure.\n${call}`
    const parsed = parseAssistantOutput(text, { parseToolCalls: true })
    expect(parsed.reasoning).toBe('\nplan\n')
    expect(parsed.content).toBe('\n\nSure.\n')
    expect(parsed.toolCalls).toHaveLength(1)
    expect(parsed.toolCalls[0]?.name).toBe('Write')
    expect(parsed.toolCalls[0]?.arguments).toBe('{"path": "a.txt", "content": "hi"}')
    const range = parsed.toolCalls[0]?.range
    expect(range && text.slice(range.start, range.end)).toBe(call)
  })

  it('returns null content when only whitespace precedes tool calls', () => {
    const parsed = parseAssistantOutput(`<think>\nx\n</think>\n\n${call}`, { parseToolCalls: true })
    expect(parsed.content).toBeNull()
    expect(parsed.toolCalls).toHaveLength(1)
  })

  it('leaves tool-call markup in content when tools are not parsed', () => {
    const parsed = parseAssistantOutput(call, { parseToolCalls: false })
    expect(parsed.toolCalls).toEqual([])
    expect(parsed.content).toBe(call)
  })

  it('falls back to plain content when a block is not valid JSON (like hermes)', () => {
    const broken = '<tool_call>\n{"name": "Write", "arguments": {"path": \n</tool_call>'
    const parsed = parseAssistantOutput(`Hi ${broken}`, { parseToolCalls: true })
    expect(parsed.toolCalls).toEqual([])
    expect(parsed.content).toBe(`Hi ${broken}`)
  })

  it('treats an unterminated think block as reasoning only', () => {
    const parsed = parseAssistantOutput('<think>\nstill going', { parseToolCalls: true })
    expect(parsed.reasoning).toBe('\nstill going')
    expect(parsed.content).toBeNull()
  })

  it('has no reasoning without think tags (thinking disabled)', () => {
    const parsed = parseAssistantOutput('Hello!', { parseToolCalls: true })
    expect(parsed.reasoning).toBeNull()
    expect(parsed.content).toBe('Hello!')
  })
})

describe('computeLogprobs', () => {
  const options = { seed: 7, promptHash: 1234, topCount: 5, regularVocabSize: 151643 }
  const ids = Array.from({ length: 200 }, (_, index) => (index * 7919) % 151643)

  it('is negative, float32-exact and deterministic', () => {
    const first = computeLogprobs(ids, options)
    expect(first).toHaveLength(ids.length)
    for (const entry of first) {
      expect(entry.logprob).toBeLessThan(0)
      expect(Math.fround(entry.logprob)).toBe(entry.logprob)
      for (const candidate of entry.top) expect(Math.fround(candidate.logprob)).toBe(candidate.logprob)
    }
    expect(computeLogprobs(ids, options)).toEqual(first)
    expect(computeLogprobs(ids, { ...options, seed: 8 })).not.toEqual(first)
    expect(computeLogprobs(ids, { ...options, promptHash: 4321 })).not.toEqual(first)
  })

  it('gives sorted top candidates whose probabilities sum to at most 1', () => {
    for (const entry of computeLogprobs(ids, options)) {
      expect(entry.top).toHaveLength(5)
      const values = entry.top.map((candidate) => candidate.logprob)
      expect([...values].sort((left, right) => right - left)).toEqual(values)
      expect(new Set(entry.top.map((candidate) => candidate.id)).size).toBe(5)
      const mass = values.reduce((sum, value) => sum + Math.exp(value), 0)
      expect(mass).toBeLessThanOrEqual(1 + 1e-6)
    }
    expect(computeLogprobs(ids, { ...options, topCount: 0 })[0]?.top).toEqual([])
  })
})
