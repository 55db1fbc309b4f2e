/**
 * @module
 * Gemini schemas → JSON Schema the engine's guided decoding understands. Gemini's OpenAPI-style
 * `Schema` spells types in upper case (`OBJECT`, `STRING`, `INTEGER`; Gemini CLI's router sends them in
 * `responseJsonSchema` too) and marks optionality with `nullable`. Types are lower-cased recursively
 * (Polar does the same), walking only schema positions so property names and `enum` / `const` values
 * are never touched; `nullable: true` becomes a `"null"` type member.
 */

import { MAX_JSON_DEPTH } from '../../json-depth.ts'

type Json = Record<string, unknown>

const isObject = (value: unknown): value is Json => value !== null && typeof value === 'object' && !Array.isArray(value)

const SCHEMA_MAPS = ['properties', 'patternProperties', '$defs', 'definitions', 'dependentSchemas'] as const
const SCHEMA_LISTS = ['anyOf', 'oneOf', 'allOf', 'prefixItems'] as const
const SCHEMA_VALUES = ['not', 'if', 'then', 'else', 'contains', 'additionalProperties', 'additionalItems', 'propertyNames'] as const

/** Recursive, bounded: bodies are held to `MAX_JSON_DEPTH` at the edge, and the walk stops there regardless. */
export function toJsonSchema(schema: unknown, depth = 0): unknown {
  if (!isObject(schema) || depth > MAX_JSON_DEPTH) return schema
  const inner = (value: unknown) => toJsonSchema(value, depth + 1)
  const out: Json = { ...schema }
  if (typeof out.type === 'string') out.type = out.type.toLowerCase()
  else if (Array.isArray(out.type)) out.type = out.type.map((type) => (typeof type === 'string' ? type.toLowerCase() : type))
  if (out.nullable === true) {
    delete out.nullable
    if (typeof out.type === 'string' && out.type !== 'null') out.type = [out.type, 'null']
    else if (Array.isArray(out.type) && !out.type.includes('null')) out.type = [...out.type, 'null']
  } else if (out.nullable === false) delete out.nullable
  for (const key of SCHEMA_MAPS) {
    const map = out[key]
    if (isObject(map)) out[key] = Object.fromEntries(Object.entries(map).map(([name, value]) => [name, inner(value)]))
  }
  for (const key of SCHEMA_LISTS) {
    const list = out[key]
    if (Array.isArray(list)) out[key] = list.map(inner)
  }
  for (const key of SCHEMA_VALUES) if (isObject(out[key])) out[key] = inner(out[key])
  if (Array.isArray(out.items)) out.items = out.items.map(inner)
  else if (isObject(out.items)) out.items = inner(out.items)
  return out
}
