/**
 * @module engine/byte-level
 * GPT-2 byte-level BPE alphabet (`bytes_to_unicode`): every vocabulary entry of a byte-level
 * tokenizer such as Qwen's is a string of these 256 stand-in characters, one per raw byte.
 * Needed to get a token's exact bytes (incremental streaming decode, drift splits).
 */

const BYTE_TO_CHAR: string[] = buildByteToChar()
const CHAR_TO_BYTE = new Map<string, number>(BYTE_TO_CHAR.map((char, byte) => [char, byte]))

function buildByteToChar(): string[] {
  const printable: number[] = []
  for (let byte = 0x21; byte <= 0x7e; byte++) printable.push(byte)
  for (let byte = 0xa1; byte <= 0xac; byte++) printable.push(byte)
  for (let byte = 0xae; byte <= 0xff; byte++) printable.push(byte)
  const table: string[] = new Array<string>(256)
  for (const byte of printable) table[byte] = String.fromCharCode(byte)
  let shifted = 0
  for (let byte = 0; byte < 256; byte++) {
    if (table[byte] === undefined) {
      table[byte] = String.fromCharCode(256 + shifted)
      shifted++
    }
  }
  return table
}

/** Raw bytes of a byte-level vocabulary string, or `null` if it is not one. */
export function byteLevelToBytes(token: string): Uint8Array | null {
  const bytes = new Uint8Array(token.length)
  for (let index = 0; index < token.length; index++) {
    const byte = CHAR_TO_BYTE.get(token.charAt(index))
    if (byte === undefined) return null
    bytes[index] = byte
  }
  return bytes
}

export function bytesToByteLevel(bytes: Uint8Array): string {
  let text = ''
  for (const byte of bytes) text += BYTE_TO_CHAR[byte] ?? ''
  return text
}
