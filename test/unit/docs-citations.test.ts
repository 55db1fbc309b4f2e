/**
 * @module
 * Source comments cite `docs/` (readable in the repo), never reference notes outside it: every
 * `polar-compat.md` / `wire-protocols.md` citation is `docs/…` and names a section that exists there.
 */
import { readdirSync, readFileSync } from 'node:fs'
import { join, relative, resolve } from 'node:path'
import { describe, expect, it } from 'vitest'

const ROOT = resolve(import.meta.dirname, '../..')

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) return entry.name === 'node_modules' || entry.name === '__fixtures__' ? [] : sources(path)
    return /\.(ts|md)$/.test(entry.name) ? [path] : []
  })
}

function sections(doc: string): Set<string> {
  const text = readFileSync(join(ROOT, 'docs', doc), 'utf8')
  const found = new Set<string>()
  for (const match of text.matchAll(/^## (\d+)\./gm)) found.add(match[1] as string)
  for (const match of text.matchAll(/^(\d+)\. \*\*/gm)) found.add(`5.${match[1]}`)
  return found
}

describe('citations of protocol notes', () => {
  it('point into docs/ at sections that exist', () => {
    const known = { 'polar-compat.md': sections('polar-compat.md'), 'wire-protocols.md': sections('wire-protocols.md') }
    const problems: string[] = []
    const files = ['src', 'runner', 'cli', 'scripts', 'engine', 'bench'].flatMap((dir) => sources(join(ROOT, dir)))
    for (const file of files) {
      const text = readFileSync(file, 'utf8')
      for (const match of text.matchAll(/(\S*)(polar-compat|wire-protocols)\.md`?\)? ((?:§[\d.]+(?:, )?)+)/g)) {
        const where = `${relative(ROOT, file)}: ${match[0]}`
        if (!/docs\/$/.test((match[1] as string).replace(/^[`(]+/, ''))) problems.push(`${where} (not under docs/)`)
        for (const section of (match[3] as string)
          .split(/,\s*/)
          .map((part) => part.replace('§', '').trim())
          .filter(Boolean)) {
          if (!known[`${match[2]}.md` as keyof typeof known].has(section)) problems.push(`${where} (no section ${section})`)
        }
      }
    }
    expect(problems).toEqual([])
  })
})
