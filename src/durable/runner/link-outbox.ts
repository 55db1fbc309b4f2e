/**
 * @module
 * Hub → runner delivery: the hub no longer holds runners' sockets, each runner's `RunnerLink` does.
 * Messages (and closes) the hub addresses to one runner are queued per runner and flushed by RPC in
 * order, one batch in flight per runner (a batch carries everything queued meanwhile), so an
 * `assign` never overtakes the `registered` before it and a close comes after the error it explains.
 * Sending never waits: the hub may be answering that very runner's link when it sends.
 */
import { logError } from '../../contract/log.ts'
import type { EdgeMessage } from '../../contract/runner-protocol.ts'

/** `connection`: deliver the message only on that connection (the link's id for a socket), else not at all. */
export type LinkDelivery = { message: EdgeMessage; connection?: string } | { close: { code: number; reason: string } }

/** The part of a `RunnerLink` the hub calls. */
export interface LinkPort {
  deliver(items: LinkDelivery[]): Promise<boolean>
}

export class LinkOutbox {
  readonly #link: (runnerId: string) => LinkPort
  readonly #queues = new Map<string, LinkDelivery[]>()

  constructor(link: (runnerId: string) => LinkPort) {
    this.#link = link
  }

  post(runnerId: string, item: LinkDelivery): void {
    const queue = this.#queues.get(runnerId)
    if (queue) {
      // A flush is running for this runner: it picks this up with its next batch.
      queue.push(item)
      return
    }
    this.#queues.set(runnerId, [item])
    void this.#flush(runnerId)
  }

  async #flush(runnerId: string): Promise<void> {
    const link = this.#link(runnerId)
    for (;;) {
      const queue = this.#queues.get(runnerId) ?? []
      if (queue.length === 0) {
        this.#queues.delete(runnerId)
        return
      }
      const batch = queue.splice(0)
      try {
        await link.deliver(batch)
      } catch (error) {
        // The link is unreachable: its socket is gone with it, and its close reaches the hub as a disconnect.
        logError('runner hub: delivery to runner', runnerId, 'failed:', error)
      }
    }
  }
}
