/**
 * The runner's end of the edge port forward, on its own: an `http:` edge relayed byte for byte, an
 * `https:` edge reverse-proxied over TLS (Host rewritten to the edge's, bodies streamed both ways without
 * buffering, upgrades tunnelled). Clients speak plain HTTP to the unix socket, as the sandbox does.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { existsSync } from 'node:fs'
import { createServer as createHttpServer, request, type IncomingMessage, type ServerResponse } from 'node:http'
import { createServer as createHttpsServer } from 'node:https'
import type { Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startEdgeRelay } from '../../runner/runtime/edge-relay.ts'

const TLS_DIR = join(import.meta.dirname, '../support/tls')
let base: string
let cert: string
let key: string

beforeAll(async () => {
  base = await mkdtemp(join(tmpdir(), 'rg-relay-'))
  cert = await readFile(join(TLS_DIR, 'cert.pem'), 'utf8')
  key = await readFile(join(TLS_DIR, 'key.pem'), 'utf8')
})

afterAll(async () => {
  await rm(base, { recursive: true, force: true })
})

/** An edge stand-in: echoes method, path, host and body; `/stream` holds its second chunk until released. */
function edgeHandler(release: Promise<void>) {
  return (req: IncomingMessage, res: ServerResponse) => {
    if (req.url === '/base/stream') {
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      res.write('data: first\n\n')
      release.then(() => res.end('data: second\n\n'))
      return
    }
    let body = ''
    req.on('data', (chunk: Buffer) => {
      body += chunk.toString()
    })
    req.on('end', () => res.end(JSON.stringify({ method: req.method, url: req.url, host: req.headers.host, body })))
  }
}

function onUpgrade(req: IncomingMessage, socket: Socket) {
  socket.write('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n')
  socket.write(`hello ${req.url}\n`)
  socket.pipe(socket)
}

function viaSocket(socketPath: string, path: string, method = 'GET', body?: string): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath, path, method, headers: { host: '127.0.0.1:8787' } }, resolve)
    req.on('error', reject)
    req.end(body)
  })
}

function text(res: IncomingMessage): Promise<string> {
  return new Promise((resolve) => {
    let out = ''
    res.on('data', (chunk: Buffer) => {
      out += chunk.toString()
    })
    res.on('end', () => resolve(out))
  })
}

async function exercise(kind: 'http' | 'https') {
  let releaseStream!: () => void
  const release = new Promise<void>((resolve) => {
    releaseStream = resolve
  })
  const server = kind === 'https' ? createHttpsServer({ cert, key }, edgeHandler(release)) : createHttpServer(edgeHandler(release))
  server.on('upgrade', onUpgrade)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as { port: number }).port
  const socketPath = join(base, `${kind}.sock`)
  const relay = await startEdgeRelay(socketPath, `${kind}://127.0.0.1:${port}/base`, kind === 'https' ? { ca: cert } : {})
  try {
    const echoed = JSON.parse(await text(await viaSocket(socketPath, '/base/v1/chat/completions', 'POST', '{"x":1}')))
    expect(echoed).toMatchObject({ method: 'POST', url: '/base/v1/chat/completions', body: '{"x":1}' })
    // https: the edge sees its own host; http: bytes pass untouched
    expect(echoed.host).toBe(kind === 'https' ? `127.0.0.1:${port}` : '127.0.0.1:8787')

    const stream = await viaSocket(socketPath, '/base/stream')
    const first = await new Promise<string>((resolve) => stream.once('data', (chunk: Buffer) => resolve(chunk.toString())))
    expect(first).toBe('data: first\n\n') // arrived while the edge still holds the rest
    releaseStream()
    expect(await text(stream)).toBe('data: second\n\n')

    const upgraded = await new Promise<{ socket: Socket; head: Buffer }>((resolve, reject) => {
      const req = request({ socketPath, path: '/base/ws', headers: { host: '127.0.0.1:8787', connection: 'Upgrade', upgrade: 'echo' } })
      req.on('upgrade', (_res, socket, head) => resolve({ socket, head }))
      req.on('error', reject)
      req.end()
    })
    let received = upgraded.head.toString()
    upgraded.socket.on('data', (chunk: Buffer) => {
      received += chunk.toString()
    })
    upgraded.socket.write('ping\n')
    await new Promise<void>((resolve) => {
      const check = () => (received.includes('ping\n') ? resolve() : upgraded.socket.once('data', check))
      check()
    })
    expect(received).toBe('hello /base/ws\nping\n')
    upgraded.socket.destroy()
  } finally {
    await Promise.all([relay.close(), relay.close()])
    server.close()
    server.closeAllConnections()
  }
  expect(existsSync(socketPath)).toBe(false)
}

describe('edge relay', () => {
  it('relays an http edge byte for byte (streams, upgrades)', () => exercise('http'))
  it('reverse-proxies an https edge over TLS with its Host (streams, upgrades)', () => exercise('https'))
  it('refuses other schemes', async () => {
    await expect(startEdgeRelay(join(base, 'x.sock'), 'ftp://example.com')).rejects.toThrow(/http\(s\)/)
  })
})
