/**
 * @module
 * `rollgate replay <session>`: re-drive a recorded session (from `--from <edge>` or a completions dump
 * `--records file.json`) against `--edge` in a new capture session, then diff the captured tokens per call.
 * Exit 0 when every prompt matches (and every response, with `--strict`), 1 otherwise.
 */
import { readFileSync } from 'node:fs'
import { type Command, Option } from 'commander'
import type { CompletionRecord } from '../../src/contract/completion-record.ts'
import { partialPageMessage } from '../../src/contract/completions-page.ts'
import { fromPolarCompletionRecords, isPolarRecord } from '../../src/reconstruct/index.ts'
import { action, type CommonOptions, EXIT, edgeClient, output, UsageError, withEdgeOptions } from '../lib/common-options.ts'
import { EdgeClient } from '../lib/edge-client.ts'
import { diffRecords, replayOne, type TokenDiff } from '../lib/replay.ts'

interface ReplayOptions extends CommonOptions {
  from?: string
  fromToken?: string
  records?: string
  strict: boolean
}

/** The `--records` dump; a file that cannot be read or is not JSON is a usage error naming it (exit 2). */
function readRecordsFile(file: string): { completions?: unknown[]; session_id?: unknown } | unknown[] {
  let text: string
  try {
    text = readFileSync(file, 'utf8')
  } catch (error) {
    throw new UsageError(`--records ${file}: cannot read it (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`)
  }
  try {
    return JSON.parse(text) as { completions?: unknown[]; session_id?: unknown } | unknown[]
  } catch (error) {
    throw new UsageError(`--records ${file} is not JSON: ${(error as Error).message}`)
  }
}

async function recordedRecords(sessionId: string | undefined, options: ReplayOptions): Promise<CompletionRecord[]> {
  if (options.records) {
    const parsed = readRecordsFile(options.records)
    const partial = partialPageMessage(parsed)
    if (partial) throw new UsageError(`--records ${options.records}: ${partial}`)
    const list = Array.isArray(parsed) ? parsed : parsed?.completions
    if (!Array.isArray(list))
      throw new UsageError(`--records ${options.records}: not a completions dump (GET …/completions output, or its completions array)`)
    // `?format=polar` dumps (token data in a vLLM-shaped `response`) are read as scripts/reconstruct.ts reads them.
    if (list.length > 0 && isPolarRecord(list[0])) {
      const sessionId = Array.isArray(parsed) || typeof parsed.session_id !== 'string' ? undefined : parsed.session_id
      return fromPolarCompletionRecords(list, sessionId)
    }
    list.forEach((record, index) => {
      if (!Array.isArray((record as { prompt_token_ids?: unknown } | null)?.prompt_token_ids)) {
        throw new UsageError(`--records ${options.records}: completion [${index}] is not a completion record (no prompt_token_ids)`)
      }
    })
    return list as CompletionRecord[]
  }
  if (!sessionId) throw new UsageError('give a session id (recorded on --from, default --edge) or --records <file>')
  const source = new EdgeClient({ edge: options.from ?? options.edge, adminToken: options.fromToken ?? options.adminToken })
  const records: CompletionRecord[] = []
  for await (const record of source.completions(sessionId)) records.push(record as unknown as CompletionRecord)
  return records
}

export function register(program: Command): void {
  withEdgeOptions(
    program
      .command('replay')
      .description('re-drive a recorded session against an edge and diff the captured tokens')
      .argument('[session]', 'recorded session id')
      .option('--from <url>', 'edge holding the recorded session (default: --edge)')
      .addOption(new Option('--from-token <token>', 'admin token of --from').env('ROLLGATE_FROM_ADMIN_TOKEN'))
      .option('--records <file>', 'a completions dump (GET …/completions output) instead of a live session')
      .option('--strict', 'also require identical responses (deterministic engine)', false),
  ).action(
    action(async (sessionId: string | undefined, options: ReplayOptions) => {
      const recorded = (await recordedRecords(sessionId, options)).sort((a, b) => a.seq - b.seq)
      if (!recorded.length) throw new UsageError('no recorded completions to replay')
      const client = edgeClient(options)
      const created = await client.json<{ session_id: string; token: string }>('POST', '/v1/sessions', {
        metadata: { replay_of: sessionId ?? options.records ?? null },
      })
      const completionIds = new Map<string, string>()
      const diffs: TokenDiff[] = []
      let nextSeq = 0
      for (const record of recorded) {
        const response = await replayOne({ edge: client.edge, token: created.token }, record, completionIds)
        await response.text()
        const page = await client.json<{ completions: CompletionRecord[] }>(
          'GET',
          `/v1/sessions/${created.session_id}/completions?after_seq=${nextSeq - 1}&limit=1`,
        )
        const replayed = page.completions[0] ?? null
        if (replayed) {
          nextSeq = replayed.seq + 1
          completionIds.set(record.completion_id, replayed.completion_id)
        }
        const earlier = diffs.filter((diff) => !diff.response_equal).map((diff) => diff.seq)
        diffs.push(diffRecords(record, replayed, response.ok ? undefined : `HTTP ${response.status}`, earlier))
      }
      const matched = diffs.filter((diff) => diff.prompt_equal && (!options.strict || diff.response_equal)).length
      const summary = {
        recorded_session: sessionId ?? null,
        replay_session: created.session_id,
        calls: diffs.length,
        prompts_equal: diffs.filter((diff) => diff.prompt_equal).length,
        responses_equal: diffs.filter((diff) => diff.response_equal).length,
        diffs,
      }
      output(options, summary, () =>
        [
          `replayed ${diffs.length} calls into ${created.session_id}: prompts equal ${summary.prompts_equal}/${diffs.length}, responses equal ${summary.responses_equal}/${diffs.length}`,
          ...diffs
            .filter((diff) => !diff.prompt_equal || !diff.response_equal)
            .map(
              (diff) =>
                `  #${diff.seq} ${diff.api}: prompt ${diff.prompt_equal ? 'equal' : `differs at ${diff.prompt_divergence} (${diff.recorded_prompt_tokens} vs ${diff.replayed_prompt_tokens})`}, ` +
                `response ${diff.response_equal ? 'equal' : `differs at ${diff.response_divergence}`}${diff.error ? ` [${diff.error}]` : ''}` +
                (diff.prompt_cause ? `\n    ${diff.prompt_cause}` : ''),
            ),
        ].join('\n'),
      )
      return matched === diffs.length ? EXIT.ok : EXIT.failed
    }),
  )
}
