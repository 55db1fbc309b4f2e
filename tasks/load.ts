/**
 * @module
 * Loads a task fixture (`tasks/<name>/task.json`, a Polar `TaskRequest`) for submission: upload
 * sources in `runtime.prepare` / `runtime.eval_prepare` that are relative are resolved against the
 * task file's directory, so the runner (which reads them on its host) gets absolute paths.
 */
import { readFileSync } from 'node:fs'
import { dirname, isAbsolute, resolve } from 'node:path'
import type { TaskRequestInput } from '../src/contract/rollout.ts'

type PrepareList = Array<{ type: string; source?: string | null | undefined }> | null | undefined

export function loadTaskFile(file: string): TaskRequestInput {
  const task = JSON.parse(readFileSync(file, 'utf8')) as TaskRequestInput
  return resolveUploadSources(task, dirname(resolve(file)))
}

/** Relative upload sources of `task` (changed in place) resolved against `base`. */
export function resolveUploadSources<T extends object>(task: T, base: string): T {
  const runtime = (task as { runtime?: unknown }).runtime as { prepare?: PrepareList; eval_prepare?: PrepareList } | null | undefined
  for (const list of [runtime?.prepare, runtime?.eval_prepare]) {
    for (const action of list ?? []) {
      if (action.type !== 'exec' && typeof action.source === 'string' && !isAbsolute(action.source)) {
        action.source = resolve(base, action.source)
      }
    }
  }
  return task
}
