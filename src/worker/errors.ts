/**
 * @module
 * The one gateway error: status, kind and field, rendered by the caller's adapter in its own wire shape.
 */
import type { NormalizedError } from '../normalize/types.ts'

export class GatewayError extends Error {
  readonly status: number
  readonly kind: NormalizedError['kind']
  readonly param: string | null

  constructor(status: number, kind: NormalizedError['kind'], message: string, param: string | null = null) {
    super(message)
    this.name = 'GatewayError'
    this.status = status
    this.kind = kind
    this.param = param
  }

  toNormalized(): NormalizedError {
    return { status: this.status, kind: this.kind, message: this.message, param: this.param }
  }
}
