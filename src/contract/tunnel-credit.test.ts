/**
 * The tunnel's shared flow control: a receiver's queue grants credit in half-window batches as its consumer
 * takes bytes (none after the last frame), refuses a sender that goes beyond what was granted (counted as
 * unacknowledged bytes, not merely unread ones), holds a credit-less sender to its cap, and reports dropped
 * bytes when it fails; a sender's window waits for credit and tracks its unacknowledged bytes.
 */
import { describe, expect, it } from 'vitest'
import { CreditedQueue, CreditWindow } from './tunnel-credit.ts'

const W = 1000

describe('CreditedQueue', () => {
  it('grants in half-window batches as the consumer takes bytes, and holds the sender to what it granted', async () => {
    const grants: number[] = []
    const queue = new CreditedQueue({ windowBytes: W, grant: (bytes) => grants.push(bytes) })
    expect(queue.push(new Uint8Array(400), false)).toBeNull()
    expect(queue.push(new Uint8Array(600), false)).toBeNull()
    // A full window unacknowledged: one more byte is an overrun.
    expect(queue.push(new Uint8Array(1), false)).toBe('window')
    expect((await queue.read())?.byteLength).toBe(400)
    expect(grants).toEqual([])
    // Taken but not yet acknowledged still counts against the sender.
    expect(queue.push(new Uint8Array(1), false)).toBe('window')
    expect((await queue.read())?.byteLength).toBe(600)
    expect(grants).toEqual([1000])
    expect(queue.push(new Uint8Array(W), true)).toBeNull()
    expect((await queue.read())?.byteLength).toBe(W)
    // After the last frame no credit goes back.
    expect(grants).toEqual([1000])
    expect(await queue.read()).toBeNull()
  })

  it('hands a frame straight to a waiting read; without credit the cap bounds what stays unread', async () => {
    const taken: number[] = []
    const queue = new CreditedQueue({ windowBytes: null, capBytes: 10, taken: (bytes) => taken.push(bytes) })
    const waiting = queue.read()
    expect(queue.push(new Uint8Array(8), false)).toBeNull()
    expect((await waiting)?.byteLength).toBe(8)
    expect(taken).toEqual([8])
    expect(queue.push(new Uint8Array(10), false)).toBeNull()
    expect(queue.push(new Uint8Array(1), false)).toBe('cap')
    expect(queue.queued).toBe(10)
  })

  it('a failed queue drops what it held (reported) and rejects reads; a cancelled stream fails it', async () => {
    const dropped: number[] = []
    let cancelled = 0
    const queue = new CreditedQueue({ windowBytes: W, dropped: (bytes) => dropped.push(bytes), cancel: () => cancelled++ })
    queue.push(new Uint8Array(300), false)
    await queue.stream.cancel()
    expect(cancelled).toBe(1)
    expect(dropped).toEqual([300])
    await expect(queue.read()).rejects.toThrow(/cancelled/)
  })
})

describe('CreditWindow', () => {
  it('waits for credit and tracks unacknowledged bytes', async () => {
    const window = new CreditWindow(W)
    window.spend(W)
    expect(window.maxUnacked).toBe(W)
    let woke = false
    const waiting = window.available(new AbortController().signal).then(() => {
      woke = true
    })
    await Promise.resolve()
    expect(woke).toBe(false)
    window.grant(W / 2)
    await waiting
    expect(woke).toBe(true)
    expect(window.unacked).toBe(W / 2)
    const aborted = new AbortController()
    window.spend(W)
    const stuck = window.available(aborted.signal)
    aborted.abort()
    await stuck
  })
})
