/**
 * @module engine/policy/json-schema-sample
 * The smallest JSON value valid for a schema, for structured-output side calls (Claude Code's
 * title call, Gemini CLI's router classifier): required properties only, enums → first value,
 * numbers inside `minimum`/`maximum`, strings padded to `minLength`. Upper-case Gemini types
 * (`OBJECT`, `STRING`) are accepted.
 */

import { isRecord } from '../chat-template-input.ts'
import type { JsonSchema } from './policy.ts'

const MAX_DEPTH = 16
const STRING_FORMAT_SAMPLES: Record<string, string> = {
  'date-time': '1970-01-01T00:00:00Z',
  date: '1970-01-01',
  time: '00:00:00Z',
  email: 'user@example.com',
  uri: 'https://example.com',
  url: 'https://example.com',
  uuid: '00000000-0000-4000-8000-000000000000',
  hostname: 'example.com',
  ipv4: '127.0.0.1',
}

export interface SampleHints {
  /** Text for string properties whose name looks like a title or summary. */
  title: string
}

export function sampleJsonForSchema(schema: unknown, hints: SampleHints): unknown {
  return sample(schema, isRecord(schema) ? schema : {}, undefined, hints, 0)
}

function sample(node: unknown, root: JsonSchema, key: string | undefined, hints: SampleHints, depth: number): unknown {
  if (!isRecord(node) || depth > MAX_DEPTH) return node === false ? null : {}
  const schema = resolveRef(node, root)
  if ('const' in schema) return schema.const
  if (Array.isArray(schema.enum) && schema.enum.length > 0) return schema.enum[0]
  const variants = Array.isArray(schema.anyOf) ? schema.anyOf : Array.isArray(schema.oneOf) ? schema.oneOf : null
  if (variants !== null && variants.length > 0) {
    const preferred = variants.find((variant) => !(isRecord(variant) && variant.type === 'null'))
    return sample(preferred ?? variants[0], root, key, hints, depth + 1)
  }
  if (Array.isArray(schema.allOf)) return sample(mergeAllOf(schema, root), root, key, hints, depth + 1)
  switch (schemaType(schema)) {
    case 'object':
      return sampleObject(schema, root, hints, depth)
    case 'array': {
      const count = numberOr(schema.minItems, 0)
      return Array.from({ length: count }, () => sample(schema.items, root, key, hints, depth + 1))
    }
    case 'string':
      return sampleString(schema, key, hints)
    case 'integer':
      return sampleNumber(schema, true)
    case 'number':
      return sampleNumber(schema, false)
    case 'boolean':
      return false
    case 'null':
      return null
    default:
      return key === undefined ? {} : sampleString(schema, key, hints)
  }
}

function sampleObject(schema: JsonSchema, root: JsonSchema, hints: SampleHints, depth: number) {
  const result: Record<string, unknown> = {}
  const properties = isRecord(schema.properties) ? schema.properties : {}
  const required = Array.isArray(schema.required) ? schema.required : []
  for (const name of required) {
    if (typeof name !== 'string') continue
    result[name] = sample(properties[name] ?? {}, root, name, hints, depth + 1)
  }
  return result
}

function sampleString(schema: JsonSchema, key: string | undefined, hints: SampleHints): string {
  const format = typeof schema.format === 'string' ? STRING_FORMAT_SAMPLES[schema.format] : undefined
  let text = format ?? (key !== undefined && /title|summary|name|topic/i.test(key) ? hints.title : 'ok')
  const minLength = numberOr(schema.minLength, 0)
  if (text.length < minLength) text = text.padEnd(minLength, 'x')
  const maxLength = numberOr(schema.maxLength, Number.POSITIVE_INFINITY)
  return text.length > maxLength ? text.slice(0, maxLength) : text
}

function sampleNumber(schema: JsonSchema, integer: boolean): number {
  const step = integer ? 1 : 0.5
  let low = Number.NEGATIVE_INFINITY
  if (typeof schema.minimum === 'number') low = schema.minimum
  if (typeof schema.exclusiveMinimum === 'number') low = Math.max(low, schema.exclusiveMinimum + step)
  let high = Number.POSITIVE_INFINITY
  if (typeof schema.maximum === 'number') high = schema.maximum
  if (typeof schema.exclusiveMaximum === 'number') high = Math.min(high, schema.exclusiveMaximum - step)
  let value = Number.isFinite(low) ? low : Math.min(0, high)
  if (integer) value = Math.ceil(value)
  if (value > high) value = integer ? Math.floor(high) : high
  return value
}

function schemaType(schema: JsonSchema): string | undefined {
  const raw = Array.isArray(schema.type)
    ? schema.type.find((type) => typeof type === 'string' && type.toLowerCase() !== 'null')
    : schema.type
  if (typeof raw === 'string') return raw.toLowerCase()
  if (isRecord(schema.properties)) return 'object'
  if (schema.items !== undefined) return 'array'
  return undefined
}

function resolveRef(schema: JsonSchema, root: JsonSchema): JsonSchema {
  let current = schema
  for (let hops = 0; typeof current.$ref === 'string' && hops < MAX_DEPTH; hops++) {
    const ref = current.$ref
    if (!ref.startsWith('#')) return current
    let target: unknown = root
    for (const segment of ref.slice(1).split('/').filter(Boolean)) {
      const name = decodeURIComponent(segment.replaceAll('~1', '/').replaceAll('~0', '~'))
      target = isRecord(target) ? target[name] : undefined
    }
    if (!isRecord(target)) return current
    const { $ref: _ref, ...rest } = current
    current = { ...target, ...rest }
  }
  return current
}

function mergeAllOf(schema: JsonSchema, root: JsonSchema): JsonSchema {
  const { allOf, ...rest } = schema
  const merged: JsonSchema = { ...rest }
  const properties: Record<string, unknown> = isRecord(rest.properties) ? { ...rest.properties } : {}
  const required = new Set<unknown>(Array.isArray(rest.required) ? rest.required : [])
  for (const part of Array.isArray(allOf) ? allOf : []) {
    if (!isRecord(part)) continue
    const resolved = resolveRef(part, root)
    for (const [name, value] of Object.entries(resolved)) {
      if (name === 'properties' && isRecord(value)) Object.assign(properties, value)
      else if (name === 'required' && Array.isArray(value)) for (const item of value) required.add(item)
      else if (!(name in merged)) merged[name] = value
    }
  }
  if (Object.keys(properties).length > 0) merged.properties = properties
  if (required.size > 0) merged.required = [...required]
  return merged
}

function numberOr(value: unknown, fallback: number): number {
  return typeof value === 'number' && Number.isFinite(value) ? value : fallback
}
