/**
 * @module
 * Load a recorded request fixture (`{path, headers, body}`) and parse it with its adapter.
 */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import type { ProviderAdapter } from '../../../src/normalize/adapter.ts'
import type { ParsedRequest } from '../../../src/normalize/types.ts'

export interface Fixture {
  path: string
  headers: Record<string, string>
  body: Record<string, unknown>
  url: URL
}

export function fixture(provider: string, name: string): Fixture {
  const file = join(import.meta.dirname, '../../../src/normalize/providers', provider, '__fixtures__', `${name}.request.json`)
  const data = JSON.parse(readFileSync(file, 'utf8')) as Omit<Fixture, 'url'>
  return { ...data, url: new URL(data.path, 'http://edge.test') }
}

export function parseFixture(adapter: ProviderAdapter, provider: string, name: string): ParsedRequest {
  const { body, url } = fixture(provider, name)
  return adapter.parseRequest(body, url)
}

export const codes = (parsed: ParsedRequest) => parsed.warnings.map((warning) => warning.code)
