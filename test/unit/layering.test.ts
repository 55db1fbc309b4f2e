/**
 * @module
 * The layering rule of the source tree: src/contract ← src/normalize ← src/reconstruct ← src/durable ← src/worker.
 * A module may import its own layer or a lower one, never a higher one; runner/ and cli/ never import src/worker or
 * src/durable. Reads every import specifier of every .ts file.
 */

import { readdirSync, readFileSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { describe, expect, it } from 'vitest'

const ROOT = resolve(import.meta.dirname, '../..')
const LAYERS = ['contract', 'normalize', 'reconstruct', 'durable', 'worker'] as const

function tsFiles(dir: string): string[] {
  let entries: import('node:fs').Dirent[]
  try {
    entries = readdirSync(dir, { withFileTypes: true })
  } catch {
    return []
  }
  return entries.flatMap((entry) => {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) return entry.name === 'node_modules' ? [] : tsFiles(path)
    return entry.name.endsWith('.ts') ? [path] : []
  })
}

function relativeImports(file: string): string[] {
  const source = readFileSync(file, 'utf8')
  const specifiers = [...source.matchAll(/(?:from|import)\s*\(?\s*['"](\.{1,2}\/[^'"]+)['"]/g)].map((m) => m[1] as string)
  return specifiers.map((specifier) => relative(ROOT, resolve(dirname(file), specifier)))
}

function layerOf(path: string): number {
  const match = /^src\/([^/]+)\//.exec(path)
  return match ? LAYERS.indexOf(match[1] as (typeof LAYERS)[number]) : -1
}

describe('layering', () => {
  it('no src module imports a higher layer', () => {
    const violations: string[] = []
    for (const file of tsFiles(join(ROOT, 'src'))) {
      const from = relative(ROOT, file)
      const own = layerOf(from)
      for (const target of relativeImports(file)) {
        const layer = layerOf(target)
        if (own >= 0 && layer > own) violations.push(`${from} → ${target}`)
      }
    }
    expect(violations).toEqual([])
  })

  it('runner/ and cli/ never import src/worker or src/durable', () => {
    const violations: string[] = []
    for (const file of [...tsFiles(join(ROOT, 'runner')), ...tsFiles(join(ROOT, 'cli'))]) {
      for (const target of relativeImports(file)) {
        if (/^src\/(worker|durable)\//.test(target)) violations.push(`${relative(ROOT, file)} → ${target}`)
      }
    }
    expect(violations).toEqual([])
  })
})
