/**
 * What a new user types first: `--help` and a mistyped flag on the scripts behind `npm run dev` /
 * `npm run dev:stack` / `rollgate dev`, and how `rollgate submit` prints the edge's submit warnings.
 * The scripts run as processes (they exit before starting anything).
 */
import { spawn, spawnSync } from 'node:child_process'
import { once } from 'node:events'
import { createServer } from 'node:http'
import { createServer as createNetServer, type AddressInfo } from 'node:net'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { drainTimeoutSeconds } from '../../cli/commands/gate.ts'
import { sessionLines, taskFromInputs, timeoutMs, warningLines } from '../../cli/commands/submit.ts'
import { freePort } from '../../scripts/lib/processes.ts'
import { childOutput } from '../support/child-output.ts'

const ROOT = join(import.meta.dirname, '../..')
const run = (...args: string[]) => spawnSync(process.execPath, args, { cwd: ROOT, encoding: 'utf8', timeout: 30_000 })

describe('dev scripts: usage instead of a stack trace', () => {
  for (const [name, entry] of [
    ['dev', ['scripts/dev.ts']],
    ['dev:stack', ['scripts/dev-stack.ts']],
    ['rollgate dev --stack', ['cli/rollgate.ts', 'dev', '--stack']],
  ] as const) {
    it(`${name} --help prints the usage and exits 0`, () => {
      const result = run(...entry, '--help')
      expect(result.status).toBe(0)
      expect(result.stdout).toMatch(/^Usage: npm run dev/)
      expect(result.stdout).toContain('--port')
      expect(result.stderr).toBe('')
    }, 60_000)

    it(`${name} with an unknown flag or a bad port says which and exits 2`, () => {
      const unknown = run(...entry, '--prot', '9000')
      expect(unknown.status).toBe(2)
      expect(unknown.stderr).toMatch(/^error: Unknown option '--prot'/)
      expect(unknown.stderr).not.toMatch(/\n\s+at /)
      const port = run(...entry, '--port', 'x')
      expect(port.status).toBe(2)
      expect(port.stderr).toMatch(/^error: --port must be a port number \(0-65535\), got "x"/)
    }, 60_000)
  }
})

describe('dev scripts: a port already taken is one line naming it, exit 1, nothing left running', () => {
  // Before, the edge's readiness probe was answered by whatever held the port, and a stack that never started
  // printed its URL as if it were up.
  const held = async () => {
    const server = createNetServer()
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    return { server, port: String((server.address() as AddressInfo).port) }
  }
  for (const [name, entry, flag] of [
    ['dev --port', ['scripts/dev.ts'], '--port'],
    ['dev:stack --port', ['scripts/dev-stack.ts'], '--port'],
    ['dev:stack --engine-port', ['scripts/dev-stack.ts'], '--engine-port'],
    ['engine --port', ['engine/cli.ts'], '--port'],
  ] as const) {
    it(name, async () => {
      const { server, port } = await held()
      try {
        const other = flag === '--port' ? ['--engine-port', '0'] : ['--port', '0']
        const extra = entry[0] === 'scripts/dev-stack.ts' ? [...other, '--persist-to', '/nonexistent/never-used'] : []
        const result = run(...entry, flag, port, ...(entry[0] === 'scripts/dev.ts' ? ['--persist-to', '/nonexistent/never-used'] : extra))
        expect(result.stderr).toMatch(
          new RegExp(`^error: port ${port} is already in use \\(.*\\): stop it, or pick another with ${flag}\\n$`),
        )
        // It names what holds the port (here this test's process), so a leftover edge with no terminal can be stopped.
        expect(result.stderr).toContain(`(pid ${process.pid}: node `)
        expect(result.status).toBe(1)
      } finally {
        server.close()
      }
    }, 60_000)
  }
})

describe('rollgate: a mistyped command, flag or choice exits 2 (bad input), as the README says', () => {
  for (const args of [['status', '--bogus'], ['export', 's', '--format', 'nope'], ['nosuch']]) {
    it(args.join(' '), () => {
      const result = run('cli/rollgate.ts', ...args)
      expect(result.stderr).toMatch(/^error: /)
      expect(result.status).toBe(2)
    }, 60_000)
  }
  it('replay --records with a file that is missing or not JSON names it and exits 2 (no stack trace)', () => {
    for (const [file, message] of [
      ['/nonexistent/records.json', /^rollgate: --records \/nonexistent\/records\.json: cannot read it \(ENOENT\)\n$/],
      ['package.json', /^rollgate: --records package\.json: not a completions dump/],
      ['README.md', /^rollgate: --records README\.md is not JSON: /],
    ] as const) {
      const result = run('cli/rollgate.ts', 'replay', '--records', file)
      expect(result.stderr, file).toMatch(message)
      expect(result.status, file).toBe(2)
    }
  }, 60_000)
  it('--help still exits 0', () => {
    expect(run('cli/rollgate.ts', 'status', '--help').status).toBe(0)
  }, 60_000)
})

it('npm run engine: a mistyped flag or value says which and exits 2', () => {
  for (const [args, message] of [
    [['--prot', '1'], "error: Unknown option '--prot'"],
    [['--port', 'x'], 'error: --port must be a non-negative number, got "x"'],
    [['--policy', 'smart'], 'error: --policy must be one of scripted, script, drift, solver, solver-subagent, got "smart"'],
    [['--script', '/nonexistent/turns.json'], 'error: --script /nonexistent/turns.json: cannot read it (ENOENT)'],
    [['--script', 'README.md'], 'error: --script README.md is not JSON: '],
    [['--script', 'package.json'], 'error: --script package.json: ✖ Invalid input: expected array, received object'],
  ] as const) {
    const result = run('engine/cli.ts', ...args)
    expect(result.stderr.startsWith(message), result.stderr).toBe(true)
    expect(result.stderr.split('\n')[2], args.join(' ')).toBe('usage: npm run engine -- [options]   (also: npx rollgate engine …)')
    expect(result.status, args.join(' ')).toBe(2)
  }
}, 60_000)

it('npm run demo checks --harness and --samples before starting anything (exit 2, the known harnesses named)', () => {
  const harness = run('scripts/demo.ts', '--harness', 'qwen-code')
  expect(harness.status).toBe(2)
  expect(harness.stderr).toMatch(/^error: --harness: unknown harness "qwen-code" \(known: codex, claude_code, .*qwen_code/)
  expect(harness.stdout).toBe('')
  const samples = run('scripts/demo.ts', '--samples', '0')
  expect(samples.status).toBe(2)
  expect(samples.stderr).toMatch(/^error: --samples must be an integer from 1 to 32, got "0"/)
}, 60_000)

it('dev:stack names the policies when --policy is not one', () => {
  const result = run('scripts/dev-stack.ts', '--policy', 'smart')
  expect(result.status).toBe(2)
  expect(result.stderr).toMatch(/^error: --policy must be one of scripted, script, drift, solver, solver-subagent, got "smart"/)
}, 60_000)

it('rollgate export into a reader that stops early (`| head`) ends quietly, exit 0, no EPIPE stack trace', async () => {
  // A stand-in edge that streams a large export; the reader takes its first chunk and closes the pipe. `s1` is no
  // rollout session (export asks, to say where a rollout session's rewards are): 404 as the edge answers.
  const edge = createServer((request, response) => {
    if (request.url?.startsWith('/rollout/session/')) {
      response.writeHead(404, { 'content-type': 'application/json' })
      response.end(
        JSON.stringify({ error: { message: 'session s1 not found', type: 'invalid_request_error', param: null, code: 'not_found' } }),
      )
      return
    }
    response.writeHead(200, { 'content-type': 'application/json' })
    const chunk = `${'x'.repeat(64 * 1024)}`
    let sent = 0
    const more = () => {
      while (sent < 256 && response.write(chunk)) sent++
      if (sent >= 256) response.end()
      else response.once('drain', more)
    }
    more()
  })
  await new Promise<void>((resolve) => edge.listen(0, '127.0.0.1', resolve))
  try {
    const address = edge.address() as AddressInfo
    const child = spawn(process.execPath, ['cli/rollgate.ts', 'export', 's1', '--edge', `http://127.0.0.1:${address.port}`], { cwd: ROOT })
    let stderr = ''
    child.stderr.on('data', (data) => {
      stderr += data
    })
    await once(child.stdout, 'data')
    child.stdout.destroy()
    const [code] = (await once(child, 'exit')) as [number | null]
    expect({ code, stderr }).toEqual({ code: 0, stderr: '' })
  } finally {
    await new Promise<void>((resolve) => edge.close(() => resolve()))
  }
}, 60_000)

describe('rollgate: an edge or engine URL that is not one is bad input (exit 2, nothing started), naming what to give', () => {
  // Before, `127.0.0.1:8787` was "edge unreachable" (exit 3) and a harness's `<edge>/v1` a 404 on an admin route;
  // the runner retried either forever.
  for (const [args, env, message] of [
    [
      ['status', '--edge', '127.0.0.1:8787'],
      {},
      /argument '127\.0\.0\.1:8787' is invalid\. Not a URL: give the edge's base URL with its scheme, e\.g\. http:\/\/127\.0\.0\.1:8787\n/,
    ],
    [['status', '--edge', 'ftp://edge'], {}, /Not an http\(s\) URL/],
    [
      ['status'],
      { ROLLGATE_EDGE_URL: 'http://127.0.0.1:8787/v1' },
      /from env 'ROLLGATE_EDGE_URL' is invalid\. It ends in \/v1, as a harness's base URL does: give the edge's own, without \/v1 \(e\.g\. http:\/\/127\.0\.0\.1:8787\)/,
    ],
    [['export', 's1', '--edge', 'https://edge.example/v1beta/'], {}, /without \/v1beta \(e\.g\. https:\/\/edge\.example\)/],
    [['runner', '--edge', 'http://127.0.0.1:8787/v1', '--state-dir', '/nonexistent/never-used'], {}, /It ends in \/v1/],
    [
      ['runner', '--upstream', '127.0.0.1:8000', '--state-dir', '/nonexistent/never-used'],
      {},
      /argument '127\.0\.0\.1:8000' is invalid\. Not an http\(s\) URL: give the engine's base URL/,
    ],
  ] as const) {
    it(`${Object.entries(env)
      .map(([key, value]) => `${key}=${value} `)
      .join('')}rollgate ${args.join(' ')}`, () => {
      const result = spawnSync(process.execPath, ['cli/rollgate.ts', ...args], {
        cwd: ROOT,
        encoding: 'utf8',
        timeout: 30_000,
        env: { ...process.env, ROLLGATE_EDGE_URL: '', ...env },
      })
      expect(result.stderr).toMatch(/^error: option '--(edge|upstream) <url>' /)
      expect(result.stderr).toMatch(message)
      expect(result.stdout).toBe('')
      expect(result.status).toBe(2)
    }, 60_000)
  }
  it('a URL without the path is taken (trailing slash and all)', () => {
    const parsed = spawnSync(process.execPath, ['cli/rollgate.ts', 'status', '--edge', 'http://127.0.0.1:1/', '--json'], {
      cwd: ROOT,
      encoding: 'utf8',
      timeout: 30_000,
    })
    expect(parsed.stderr).toMatch(/^rollgate: edge unreachable at http:\/\/127\.0\.0\.1:1 /)
  }, 60_000)
})

describe('rollgate: the edge errors a new user meets first name the next step', () => {
  it('an edge that is not running: exit 3, then how to start one or point at another', async () => {
    const port = await freePort()
    const child = spawn(process.execPath, ['cli/rollgate.ts', 'status', '--edge', `http://127.0.0.1:${port}`], { cwd: ROOT })
    const result = await childOutput(child)
    expect(result.code).toBe(3)
    expect(result.stderr).toBe(
      `rollgate: edge unreachable at http://127.0.0.1:${port} (ECONNREFUSED)\n` +
        '  is the edge running? `npm run dev:stack` starts one on http://127.0.0.1:8787; another edge: --edge <url> or ROLLGATE_EDGE_URL\n',
    )
  }, 60_000)

  it('a wrong admin token: exit 3, then where the right one comes from', async () => {
    // The edge's answer to a wrong admin token (src/worker/auth).
    const edge = createServer((_request, response) => {
      response.writeHead(401, { 'content-type': 'application/json' })
      response.end(JSON.stringify({ error: { message: 'invalid admin token', type: 'authentication_error', param: null, code: null } }))
    })
    await new Promise<void>((resolve) => edge.listen(0, '127.0.0.1', resolve))
    try {
      const { port } = edge.address() as AddressInfo
      const child = spawn(process.execPath, ['cli/rollgate.ts', 'status', '--edge', `http://127.0.0.1:${port}`, '--admin-token', 'wrong'], {
        cwd: ROOT,
      })
      const result = await childOutput(child)
      expect(result.code).toBe(3)
      expect(result.stderr).toBe(
        'rollgate: GET /rollout/status → 401: invalid admin token\n' +
          "  pass the edge's ROLLGATE_ADMIN_TOKEN with --admin-token or ROLLGATE_ADMIN_TOKEN (npm run dev / dev:stack: dev-admin-token unless ROLLGATE_ADMIN_TOKEN was set)\n",
      )
    } finally {
      await new Promise<void>((resolve) => edge.close(() => resolve()))
    }
  }, 60_000)
})

it('rollgate submit of a task whose earlier run goes on says how to run it again (exit 2)', async () => {
  // The edge's answer to a task id still running (src/worker/routes/rollout.ts).
  const edge = createServer((_request, response) => {
    response.writeHead(409, { 'content-type': 'application/json' })
    response.end(
      JSON.stringify({
        error: { message: 'task fix-stats is still running', type: 'invalid_request_error', param: 'task_id', code: null },
      }),
    )
  })
  await new Promise<void>((resolve) => edge.listen(0, '127.0.0.1', resolve))
  try {
    const address = edge.address() as AddressInfo
    const child = spawn(
      process.execPath,
      ['cli/rollgate.ts', 'submit', 'tasks/fix-stats', '--no-wait', '--edge', `http://127.0.0.1:${address.port}`],
      {
        cwd: ROOT,
      },
    )
    let stderr = ''
    child.stderr.on('data', (data) => {
      stderr += data
    })
    const [code] = (await once(child, 'exit')) as [number | null]
    expect(code).toBe(2)
    expect(stderr).toBe(
      'rollgate: POST /rollout/task/submit → 409: task fix-stats is still running (submit it again under another --task-id, or follow it: rollgate status fix-stats)\n',
    )
  } finally {
    await new Promise<void>((resolve) => edge.close(() => resolve()))
  }
}, 60_000)

describe('rollgate submit', () => {
  it('prints each submit warning as one line with its code and message', () => {
    expect(
      warningLines([
        { code: 'no_runner_connected', message: 'no runner connected: …' },
        { code: 'evaluator_not_offered', message: 'evaluator test_on_output …' },
      ]),
    ).toBe('warning: no_runner_connected: no runner connected: …\nwarning: evaluator_not_offered: evaluator test_on_output …\n')
    expect(warningLines(undefined)).toBe('')
  })

  it('a task file: its relative upload sources mean its folder, an explicit --samples (even 1) wins over its num_samples', () => {
    const file = join(ROOT, 'tasks/fix-stats/task.json')
    const base = { builder: 'prefix_merging', wait: true, edge: '', adminToken: '', json: false }
    const fromFile = taskFromInputs(file, base) as unknown as { num_samples: number; runtime: { prepare: { source?: string }[] } }
    expect(fromFile.num_samples).toBe(4)
    expect(fromFile.runtime.prepare[0]?.source).toBe(join(ROOT, 'tasks/fix-stats/repo'))
    expect((taskFromInputs(file, { ...base, samples: '1' }) as unknown as { num_samples: number }).num_samples).toBe(1)
    const flagsOnly = taskFromInputs(undefined, { ...base, instruction: 'x', harness: 'pi' }) as unknown as { num_samples: number }
    expect(flagsOnly.num_samples).toBe(1)
    // A task folder means its task.json (was an EISDIR stack trace); a folder without one or a missing file: usage errors.
    expect(taskFromInputs(join(ROOT, 'tasks/fix-stats'), base)).toEqual(fromFile)
    expect(() => taskFromInputs(join(ROOT, 'tasks'), base)).toThrow(/tasks is a folder without a task\.json$/)
    expect(() => taskFromInputs(join(ROOT, 'tasks/nope.json'), base)).toThrow(/nope\.json: no such task file$/)
  })

  it('reads pause --timeout as the edge does: seconds in [0, 3600], else a usage error before any call', () => {
    expect(drainTimeoutSeconds('0')).toBe(0)
    expect(drainTimeoutSeconds('2.5')).toBe(2.5)
    for (const bad of ['abc', '', ' 1', '0x10', '1e2', '-1', '3601']) {
      expect(() => drainTimeoutSeconds(bad), bad).toThrow(`--timeout must be a number of seconds in [0, 3600], got "${bad}"`)
    }
  })

  it("says why a session did not complete: its error, else the last line of the agent's error", () => {
    const result = (status: 'COMPLETED' | 'ERROR', error: string | null, agentError: string | null) => ({
      session_id: 'rs_1',
      status,
      error,
      trajectory: { traces: [], metadata: { agent_result: agentError === null ? null : { error: agentError } } },
    })
    const engineError = "[API Error: This model's maximum context length is 32768 tokens.]"
    expect(sessionLines(result('ERROR', null, `Ripgrep not available\nWarning: yolo\n${engineError}\n`) as never)).toEqual([
      '  rs_1  ERROR      reward —  traces 0',
      `    why: ${engineError}`,
    ])
    expect(sessionLines(result('ERROR', 'init failed: unknown harness "nosuch"', 'ignored') as never)[1]).toBe(
      '    why: init failed: unknown harness "nosuch"',
    )
    expect(sessionLines(result('ERROR', null, null) as never)).toHaveLength(1)
    expect(sessionLines(result('COMPLETED', null, 'a warning on stderr') as never)).toHaveLength(1)
  })

  it('reads --timeout as positive seconds', () => {
    expect(timeoutMs(undefined)).toBeUndefined()
    expect(timeoutMs('1.5')).toBe(1500)
    for (const bad of ['0', '-1', 'soon', '']) expect(() => timeoutMs(bad)).toThrow(/--timeout must be a positive number of seconds/)
  })
})
