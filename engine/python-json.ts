/**
 * @module engine/python-json
 * `json.dumps(value, ensure_ascii=False)` as Python prints it: `", "` and `": "` separators and
 * Python float formatting. vLLM's hermes tool parser serializes `arguments` this way, and the
 * Qwen3 chat template's `tojson` (transformers / @huggingface/jinja) uses the same separators,
 * so emitting tool calls through this keeps sampled text and re-rendered prompts identical.
 */

/** Largest magnitude Python's `repr(float)` still prints without an exponent (exclusive). */
const PYTHON_FIXED_NOTATION_MAX = 1e16
/** Smallest magnitude Python's `repr(float)` prints without an exponent (inclusive). */
const PYTHON_FIXED_NOTATION_MIN = 1e-4

export function pythonJsonDumps(value: unknown): string {
  if (value === null || value === undefined) return 'null'
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value)
    case 'boolean':
      return value ? 'true' : 'false'
    case 'number':
      return formatPythonNumber(value)
    case 'bigint':
      return value.toString()
    case 'object':
      if (Array.isArray(value)) return `[${value.map(pythonJsonDumps).join(', ')}]`
      return formatObject(value as Record<string, unknown>)
    default:
      return 'null'
  }
}

function formatObject(record: Record<string, unknown>): string {
  const parts: string[] = []
  for (const [key, entry] of Object.entries(record)) {
    if (entry === undefined || typeof entry === 'function') continue
    parts.push(`${JSON.stringify(key)}: ${pythonJsonDumps(entry)}`)
  }
  return `{${parts.join(', ')}}`
}

/**
 * JSON numbers parsed in JS lose the int/float distinction (`1.0` → `1`); integral values are
 * printed as Python ints, everything else like Python's shortest-repr float.
 */
export function formatPythonNumber(value: number): string {
  if (Number.isNaN(value)) return 'NaN'
  if (value === Number.POSITIVE_INFINITY) return 'Infinity'
  if (value === Number.NEGATIVE_INFINITY) return '-Infinity'
  if (Number.isInteger(value)) return BigInt(value).toString()
  const magnitude = Math.abs(value)
  if (magnitude >= PYTHON_FIXED_NOTATION_MIN && magnitude < PYTHON_FIXED_NOTATION_MAX) {
    return String(value)
  }
  const [mantissa = '0', exponentText = '0'] = value.toExponential().split('e')
  const exponent = Number(exponentText)
  const sign = exponent < 0 ? '-' : '+'
  return `${mantissa}e${sign}${String(Math.abs(exponent)).padStart(2, '0')}`
}
