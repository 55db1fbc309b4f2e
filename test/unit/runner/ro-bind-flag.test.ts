/**
 * `rollgate runner --ro-bind host[:inside]`: repeatable, comma-separated in the environment, inside path
 * defaulting to the host path, relative host paths resolved, relative inside paths refused.
 */
import { resolve } from 'node:path'
import { InvalidArgumentError } from 'commander'
import { describe, expect, it } from 'vitest'
import { parseReadOnlyBinds } from '../../../cli/commands/runner.ts'

describe('--ro-bind', () => {
  it('parses host[:inside], one or comma-separated, appending to earlier flags', () => {
    const first = parseReadOnlyBinds('/usr')
    expect(first).toEqual([{ source: '/usr', target: '/usr' }])
    expect(parseReadOnlyBinds('/data/cache:/cache,models:/models', first)).toEqual([
      { source: '/usr', target: '/usr' },
      { source: '/data/cache', target: '/cache' },
      { source: resolve('models'), target: '/models' },
    ])
  })

  it('refuses a relative inside path', () => {
    expect(() => parseReadOnlyBinds('/data:data')).toThrow(InvalidArgumentError)
  })
})
