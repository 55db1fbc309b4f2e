/**
 * @module
 * Docker for tests: the private daemon (`scripts/lib/dockerd.ts`) and the tiny offline test image
 * (`docker import` of a busybox rootfs; no registry).
 */
import { chmod, copyFile, mkdir, mkdtemp, rm, symlink } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type Dockerode from 'dockerode'
import { pack } from 'tar-fs'
import { which } from '../../scripts/lib/dockerd.ts'

export { startDockerd, type TestDockerd } from '../../scripts/lib/dockerd.ts'

/**
 * `rollgate/busybox-test:1`: busybox (static, from apt) as the whole rootfs, `/bin/sh` and friends as
 * symlinks. No bash, no node: the runtime must bring its own helper.
 */
export async function importBusyboxImage(docker: Dockerode, tag = 'rollgate/busybox-test:1'): Promise<string> {
  const busybox = await which('busybox')
  if (!busybox) throw new Error('busybox is not installed (apt-get install busybox-static)')
  const root = await mkdtemp(join(tmpdir(), 'rgbusybox-'))
  try {
    for (const dir of ['bin', 'tmp', 'root', 'etc', 'proc', 'dev', 'sys']) await mkdir(join(root, dir), { recursive: true })
    await chmod(join(root, 'tmp'), 0o1777)
    await copyFile(busybox, join(root, 'bin', 'busybox'))
    await chmod(join(root, 'bin', 'busybox'), 0o755)
    for (const applet of [
      'sh',
      'ls',
      'cat',
      'echo',
      'mkdir',
      'sleep',
      'env',
      'pwd',
      'id',
      'wget',
      'nc',
      'head',
      'grep',
      'cut',
      'tr',
      'rm',
      'ps',
      'kill',
      'true',
      'false',
      'seq',
      'dd',
      'wc',
      'ln',
      'setsid',
      'printf',
    ]) {
      await symlink('busybox', join(root, 'bin', applet))
    }
    const [repo, version] = tag.split(':')
    const stream = await docker.importImage(pack(root) as unknown as NodeJS.ReadableStream, { repo, tag: version ?? 'latest' } as object)
    await new Promise<void>((resolve, reject) =>
      docker.modem.followProgress(stream, (error: Error | null) => (error ? reject(error) : resolve())),
    )
    return tag
  } finally {
    await rm(root, { recursive: true, force: true })
  }
}
