/**
 * @module
 * Docker for tests: the private daemon (`scripts/lib/dockerd.ts`) and two tiny offline test images
 * (`docker import`, no registry): a busybox rootfs, and a skeleton that runs the host's own userland
 * bind-mounted read-only (python3, pytest, git, bash: what `tasks/fix-stats` needs, without debootstrap).
 */
import { lstatSync, readlinkSync } from 'node:fs'
import { chmod, copyFile, mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises'
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

/** The host dirs whose files make up the userland: bound read-only at the same paths. */
const HOST_USERLAND = ['/usr', '/etc/alternatives']
/**
 * Top-level dirs that are `usr/…` symlinks on a merged-/usr host, else real dirs to bind too. Not `/sbin`:
 * dockerd mounts its init there, which must not resolve into the read-only `/usr` (`/usr/sbin` is on PATH).
 */
const USR_LINKS = ['bin', 'lib', 'lib32', 'lib64', 'libx32']

/**
 * `rollgate/host-userland-test:1`: empty mount points, the host's `/bin -> usr/bin` style symlinks, a
 * root-only `/etc/passwd` and no `/etc/profile` (a login shell keeps the PATH it is given). Returns the tag
 * and the host paths to bind read-only at the same place (`/usr`, `/etc/alternatives`, and any top-level
 * lib/bin dir that is not a symlink on this host).
 */
export async function importHostUserlandImage(
  docker: Dockerode,
  tag = 'rollgate/host-userland-test:1',
): Promise<{ tag: string; binds: string[] }> {
  const binds = [...HOST_USERLAND]
  const root = await mkdtemp(join(tmpdir(), 'rghostland-'))
  try {
    for (const dir of ['usr', 'sbin', 'etc/alternatives', 'root', 'tmp', 'var/tmp', 'proc', 'dev', 'sys', 'run', 'home']) {
      await mkdir(join(root, dir), { recursive: true })
    }
    await chmod(join(root, 'tmp'), 0o1777)
    await chmod(join(root, 'var/tmp'), 0o1777)
    for (const name of USR_LINKS) {
      const host = `/${name}`
      let info: ReturnType<typeof lstatSync>
      try {
        info = lstatSync(host)
      } catch {
        continue
      }
      if (info.isSymbolicLink()) await symlink(readlinkSync(host), join(root, name))
      else if (info.isDirectory()) {
        await mkdir(join(root, name))
        binds.push(host)
      }
    }
    await writeFile(join(root, 'etc/passwd'), 'root:x:0:0:root:/root:/bin/bash\n')
    await writeFile(join(root, 'etc/group'), 'root:x:0:\n')
    const [repo, version] = tag.split(':')
    const stream = await docker.importImage(pack(root) as unknown as NodeJS.ReadableStream, { repo, tag: version ?? 'latest' } as object)
    await new Promise<void>((resolve, reject) =>
      docker.modem.followProgress(stream, (error: Error | null) => (error ? reject(error) : resolve())),
    )
    return { tag, binds }
  } finally {
    await rm(root, { recursive: true, force: true })
  }
}
