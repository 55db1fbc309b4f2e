/**
 * @module
 * The runner's end of the edge port forward: a unix socket (bind-mounted into the sandbox, where the
 * launcher relays `127.0.0.1:<port>` to it) whose connections go to the edge and nowhere else.
 *
 * - `http:` edges are relayed byte for byte (TCP), so everything works unchanged: streaming, keep-alive,
 *   WebSocket upgrades.
 * - `https:` edges (the deployed Worker) are reverse-proxied at the HTTP level: the sandbox speaks plain
 *   HTTP to the forwarded port, the relay re-issues each request over TLS with the edge's Host header and
 *   streams the answer back (upgrades are tunnelled after the handshake).
 */
import { rm } from 'node:fs/promises'
import { createServer as createHttpServer, type IncomingMessage, type Server as HttpServer } from 'node:http'
import { request as httpsRequest } from 'node:https'
import { connect, createServer, isIP, type Server, type Socket } from 'node:net'
import { connect as tlsConnect } from 'node:tls'

export interface EdgeRelay {
  socketPath: string
  close(): Promise<void>
}

export interface EdgeRelayOptions {
  /** Extra trusted CA for an `https:` edge (tests; production edges use the system store / NODE_EXTRA_CA_CERTS). */
  ca?: string | Buffer
}

/** The edge as the sandbox reaches it through the forwarded loopback port (the edge URL's path kept). */
export function forwardedEdgeUrl(edgeUrl: string, port: number): string {
  return `http://127.0.0.1:${port}${new URL(edgeUrl).pathname.replace(/\/+$/, '')}`
}

/**
 * The longest unix socket path Linux takes (`sun_path` holds 108 bytes with the closing NUL). libuv binds a
 * longer path truncated, without an error: the socket then lies at another path than the one the sandbox
 * mounts, and the session fails far from the cause.
 */
export const MAX_SOCKET_PATH_BYTES = 107

export async function startEdgeRelay(socketPath: string, edgeUrl: string, options: EdgeRelayOptions = {}): Promise<EdgeRelay> {
  const url = new URL(edgeUrl)
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error(`edge URL must be http(s): ${edgeUrl}`)
  const bytes = Buffer.byteLength(socketPath)
  if (bytes > MAX_SOCKET_PATH_BYTES) {
    throw new Error(
      `edge relay socket path is ${bytes} bytes, more than a unix socket takes (${MAX_SOCKET_PATH_BYTES}): ${socketPath}; ` +
        'use a shorter state or work dir (or TMPDIR)',
    )
  }
  await rm(socketPath, { force: true })
  const sockets = new Set<Socket>()
  const server: Server | HttpServer = url.protocol === 'http:' ? tcpRelay(url, sockets) : httpsRelay(url, sockets, options.ca)
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(socketPath, () => resolve())
  })
  let closed: Promise<void> | null = null
  return {
    socketPath,
    close() {
      closed ??= new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy()
        server.close(() => resolve())
      }).then(() => rm(socketPath, { force: true }))
      return closed
    },
  }
}

function track(sockets: Set<Socket>, socket: Socket): void {
  sockets.add(socket)
  socket.once('close', () => sockets.delete(socket))
}

function edgePort(url: URL): number {
  return Number(url.port || (url.protocol === 'https:' ? 443 : 80))
}

function tcpRelay(url: URL, sockets: Set<Socket>): Server {
  return createServer((inbound) => {
    const outbound = connect(edgePort(url), url.hostname)
    track(sockets, inbound)
    track(sockets, outbound)
    inbound.pipe(outbound)
    outbound.pipe(inbound)
    inbound.on('error', () => outbound.destroy())
    outbound.on('error', () => inbound.destroy())
  })
}

/** SNI only for host names (RFC 6066 forbids IP addresses there). */
function serverName(url: URL): { servername?: string } {
  return isIP(url.hostname) ? {} : { servername: url.hostname }
}

function forwardedHeaders(request: IncomingMessage, url: URL): Record<string, string | string[]> {
  const headers: Record<string, string | string[]> = {}
  for (const [name, value] of Object.entries(request.headers)) if (value !== undefined) headers[name] = value
  headers.host = url.host
  return headers
}

function httpsRelay(url: URL, sockets: Set<Socket>, ca: string | Buffer | undefined): HttpServer {
  const server = createHttpServer((request, response) => {
    const upstream = httpsRequest(
      {
        host: url.hostname,
        port: edgePort(url),
        ...serverName(url),
        method: request.method,
        path: request.url,
        headers: forwardedHeaders(request, url),
        ...(ca ? { ca } : {}),
      },
      (answer) => {
        response.writeHead(answer.statusCode ?? 502, answer.rawHeaders)
        answer.pipe(response)
      },
    )
    upstream.on('error', (error) => {
      if (!response.headersSent) response.writeHead(502, { 'content-type': 'text/plain' })
      response.end(`rollgate edge relay: ${error.message}\n`)
    })
    response.on('close', () => upstream.destroy())
    request.pipe(upstream)
  })
  server.on('connection', (socket: Socket) => track(sockets, socket))
  server.on('upgrade', (request: IncomingMessage, inbound: Socket, head: Buffer) => {
    const outbound = tlsConnect({ host: url.hostname, port: edgePort(url), ...serverName(url), ...(ca ? { ca } : {}) }, () => {
      const lines = [`${request.method} ${request.url} HTTP/1.1`]
      for (const [name, value] of Object.entries(forwardedHeaders(request, url))) {
        for (const item of Array.isArray(value) ? value : [value]) lines.push(`${name}: ${item}`)
      }
      outbound.write(`${lines.join('\r\n')}\r\n\r\n`)
      if (head.length) outbound.write(head)
      inbound.pipe(outbound)
      outbound.pipe(inbound)
    })
    track(sockets, outbound)
    inbound.on('error', () => outbound.destroy())
    outbound.on('error', () => inbound.destroy())
  })
  return server
}
