/**
 * Commands the README gives a new user to type run from a fresh clone: the tools the repo pins as devDependencies
 * are not on a shell's `PATH`, so the README spells them through npx (before, "Deploy: `wrangler secret put …`"
 * was "command not found"). Descriptions of what runs ("the edge under `wrangler dev`") are not commands.
 */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { expect, it } from 'vitest'

const ROOT = join(import.meta.dirname, '../..')
const readme = readFileSync(join(ROOT, 'README.md'), 'utf8')
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { devDependencies: Record<string, string> }

/** Every inline code span and every line of a fenced block. */
function codeSpans(text: string): string[] {
  const spans: string[] = []
  for (const [, block] of text.matchAll(/```[a-z]*\n([\s\S]*?)```/g)) spans.push(...(block ?? '').split('\n'))
  for (const [, span] of text.replace(/```[a-z]*\n[\s\S]*?```/g, '').matchAll(/`([^`\n]+)`/g)) spans.push(span ?? '')
  return spans
}

it('wrangler commands to type are `npx wrangler …` (a devDependency, not on PATH)', () => {
  expect(pkg.devDependencies.wrangler, 'wrangler is a devDependency').toBeDefined()
  const bare = codeSpans(readme).filter((span) => /^\s*wrangler (deploy|secret|login|types|r2|tail|whoami)\b/.test(span))
  expect(bare).toEqual([])
})

it('the deploy steps set every secret the edge needs, the runner token included', () => {
  const deploy = /\nDeploy: ([\s\S]*?)\n\n/.exec(readme)?.[1] ?? ''
  for (const secret of ['ROLLGATE_ADMIN_TOKEN', 'ROLLGATE_SIGNING_KEY', 'ROLLGATE_RUNNER_TOKEN'])
    expect(deploy.replaceAll('\n', ' '), secret).toContain(`npx wrangler secret put ${secret}`)
})
