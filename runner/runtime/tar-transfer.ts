/**
 * @module
 * Tar streams for copying a host file or directory into a container and back out (the docker and apptainer
 * backends; the archive's one top entry is renamed on the way, so `upload(a, /x/b)` and
 * `download(/x/b, c)` land at `b` and `c` whatever the source was called).
 */
import { stat } from 'node:fs/promises'
import { basename, dirname, posix } from 'node:path'
import type { Readable, Writable } from 'node:stream'
import { extract, pack } from 'tar-fs'

/** A tar of the host file or directory `source` whose top entry is `name` (ENOENT when `source` is missing). */
export async function packAs(source: string, name: string): Promise<Readable> {
  const info = await stat(source)
  const archive = info.isDirectory()
    ? pack(source, { map: (header) => ({ ...header, name: posix.join(name, header.name) }) })
    : pack(dirname(source), { entries: [basename(source)], map: (header) => ({ ...header, name }) })
  return archive as unknown as Readable
}

/** Unpacks a tar whose top entry is the file or directory `top` to the host path `target` (its parent must exist). */
export function unpackAs(target: string, top: string): Writable {
  const name = basename(target)
  const unpack = extract(dirname(target), {
    map: (header) => {
      const rest = header.name === top ? '' : header.name.replace(/^[^/]*\/?/, '')
      return { ...header, name: rest ? posix.join(name, rest) : name }
    },
  })
  return unpack as unknown as Writable
}
