/**
 * The README's "Using it" block, run as written, in a second shell in the repo's directory while `npm run dev:stack`
 * (default ports 8787 / 8000, admin token `dev-admin-token`) is up: a capture session, a curl call, the pinned Qwen
 * Code CLI pointed at the edge (it creates hello.txt in a scratch directory), and the captured completions read back.
 * Both run in a network namespace of their own (`unshare -n`, only loopback: the README's fixed ports are free there,
 * and the CLI reaches nothing else). Before, the block's Qwen Code line had no `--auth-type` (a fresh install stops:
 * "No auth type is selected") and ran `npx qwen` wherever the shell was (outside the repo npx looks `qwen` up in the
 * registry).
 */
import { spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, expect, it } from 'vitest'
import { childOutput } from '../support/child-output.ts'

const ROOT = join(import.meta.dirname, '../..')
const scratch = mkdtempSync(join(tmpdir(), 'rollgate-readme-using-it-'))
let group: number | undefined

afterAll(() => {
  // The driver stops the stack itself (trap on EXIT); a test that timed out leaves its process group to end here.
  if (group !== undefined) {
    try {
      process.kill(-group, 'SIGKILL')
    } catch {
      // already gone
    }
  }
  rmSync(scratch, { recursive: true, force: true })
})

/** Processes whose command line mentions `marker` (dev:stack's wrangler and workerd name the persistence dir). */
async function processesMentioning(marker: string): Promise<string[]> {
  const ps = await childOutput(spawn('ps', ['-eo', 'pid,args'], { stdio: ['ignore', 'pipe', 'pipe'] }))
  return ps.stdout.split('\n').filter((line) => line.includes(marker) && !line.includes(' ps -eo'))
}

/** The shell block that follows the "## Using it" heading, as the README shows it. */
function usingItBlock(): string {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8')
  const block = /\n## Using it\n[\s\S]*?```sh\n([\s\S]*?)```/.exec(readme)?.[1]
  if (!block) throw new Error('README.md: no ```sh block under "## Using it"')
  return block
}

it('README "Using it" runs as written against npm run dev:stack: curl and Qwen Code calls captured, hello.txt created', async () => {
  const block = usingItBlock()
  const driver = join(scratch, 'driver.sh')
  const stackLog = join(scratch, 'stack.log')
  writeFileSync(
    driver,
    `set -u
ip link set lo up
# Terminal 1: npm run dev:stack (its script, with this test's Node), defaults but the persistence dir.
"${process.execPath}" scripts/dev-stack.ts --persist-to "${join(scratch, 'state')}" > "${stackLog}" 2>&1 &
STACK=$!
trap 'kill -INT $STACK 2>/dev/null; wait $STACK' EXIT
# Up once it prints its "try:" line (or gone: then the test fails on its log).
for _ in $(seq 240); do grep -q '^try: ' "${stackLog}" && break; kill -0 $STACK 2>/dev/null || exit 90; sleep 0.5; done
grep -q '^try: ' "${stackLog}" || exit 91
# Terminal 2: the README block, then the completions once more for the test to read.
export HOME="${join(scratch, 'home')}" npm_config_cache="${join(scratch, 'npm-cache')}" npm_config_update_notifier=false
mkdir -p "$HOME"
${block}
echo
echo "COMPLETIONS $(curl -s "$EDGE/v1/sessions/$ID/completions" -H "authorization: Bearer $ADMIN")"
`,
  )
  // PATH as a new user's shell has it: the system's Node and npm (npx --prefix finds the repo's own bins).
  const child = spawn('unshare', ['-n', 'bash', driver], {
    cwd: ROOT,
    // TMPDIR: the block's `mktemp -d` (where Qwen Code writes hello.txt) lands in this test's scratch dir.
    env: { PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', LANG: 'C.UTF-8', TMPDIR: scratch },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  })
  group = child.pid
  const result = await childOutput(child)
  const context = `${result.stdout.slice(0, 3000)}\n--- stderr ---\n${result.stderr.slice(-3000)}\n--- dev:stack ---\n${readFileSync(stackLog, 'utf8').slice(-2000)}`
  expect(result.code, context).toBe(0)
  // Step 2's curl answer, then the harness: its last line is `cat hello.txt`.
  expect(result.stdout.includes('"object":"chat.completion"'), context).toBe(true)
  // hello.txt holds `hi` (no newline): step 3's answer follows it on the same line.
  expect(
    result.stdout.split('\n').some((text) => /^hi($|\{)/.test(text)),
    context,
  ).toBe(true)
  const line = result.stdout.split('\n').find((text) => text.startsWith('COMPLETIONS '))
  const page = JSON.parse(line?.slice('COMPLETIONS '.length) ?? 'null') as {
    completions: { status: string; trainable: boolean; api: string; original_request: { messages?: { content?: unknown }[] } }[]
  }
  // The curl call and at least two Qwen Code calls (a tool call to write the file, then its answer), all captured.
  expect(page.completions.length, context).toBeGreaterThanOrEqual(3)
  for (const record of page.completions) expect(record).toMatchObject({ status: 'ok', trainable: true, api: 'openai-chat' })
  expect(JSON.stringify(page.completions.slice(1).map((record) => record.original_request))).toContain('create hello.txt containing hi')
  // The driver stopped dev:stack (engine, wrangler, workerd) on its way out: nothing of it is left.
  expect(await processesMentioning(scratch)).toEqual([])
}, 300_000)
