/**
 * @module
 * Versioned, idempotent schema for a session's SQLite. Each migration runs once, in order, on wake.
 *
 * Storage is linear in the session (docs: README "How capture works"): a prompt is stored as (parent
 * completion, shared prefix length, suffix tokens); request bodies as (parent, common prefix/suffix,
 * middle text, length), the upstream body's middle possibly as copies of the original's (v4). Existing
 * sessions migrate in place on wake; their old rows stay readable.
 */
import type { Sql } from './sql.ts'

export const MIGRATIONS: readonly string[] = [
  `CREATE TABLE IF NOT EXISTS rg_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
   CREATE TABLE IF NOT EXISTS rg_completions (
     seq INTEGER PRIMARY KEY,
     completion_id TEXT NOT NULL UNIQUE,
     created_at TEXT NOT NULL,
     api TEXT NOT NULL,
     agent TEXT NOT NULL,
     model_requested TEXT NOT NULL,
     model_used TEXT NOT NULL,
     stream INTEGER NOT NULL,
     status TEXT NOT NULL,
     trainable INTEGER NOT NULL,
     finish_reason TEXT,
     stop_reason TEXT,
     delta_depth INTEGER NOT NULL,
     prompt_parent INTEGER,
     prompt_shared INTEGER NOT NULL,
     prompt_length INTEGER,
     prompt_suffix BLOB,
     response_tokens BLOB,
     logprobs BLOB,
     logprobs_format INTEGER NOT NULL,
     request_base INTEGER NOT NULL,
     request_prefix INTEGER NOT NULL,
     request_suffix INTEGER NOT NULL,
     request_middle TEXT,
     original_prefix INTEGER NOT NULL,
     original_suffix INTEGER NOT NULL,
     original_middle TEXT,
     spilled TEXT,
     response_message TEXT,
     usage TEXT,
     warnings TEXT NOT NULL,
     error TEXT,
     timing TEXT NOT NULL,
     provenance TEXT NOT NULL,
     metadata TEXT NOT NULL
   );
   CREATE INDEX IF NOT EXISTS rg_completions_agent ON rg_completions (agent, seq);`,
  // v2: delta chains are no longer cut (linear storage at any length); reads walk them backwards and need
  // each body's length. Rows without lengths (written by v1) are read the v1 way.
  `ALTER TABLE rg_completions ADD COLUMN request_length INTEGER;
   ALTER TABLE rg_completions ADD COLUMN original_length INTEGER;`,
  // v3: where each upstream body's messages lie and where the text of the messages it adds is stored
  // (\`message-layout.ts\`), so a build parses only new messages. Rows without it (v1, v2) are read whole.
  `ALTER TABLE rg_completions ADD COLUMN request_messages TEXT;`,
  // v4: an upstream body's middle may be stored as copies of the same row's original middle plus the characters
  // they do not cover (\`request_middle\`), the copies as JSON in \`request_edits\` (\`copyCode\` in \`text-delta.ts\`):
  // the engine body renames a key in every assistant message, so it cannot share the harness body's text by
  // prefix and suffix alone. Rows without it (v1–v3) store the middle plain and are read as before.
  `ALTER TABLE rg_completions ADD COLUMN request_edits TEXT;`,
  // v5: a base snapshot table (one recent completion stored whole, so a woken object walked fewer rows) was
  // tried in development and dropped: it stored one more copy of the newest prompt and body (1.65x the token
  // floor at 1,000 turns). A database that got it loses it here.
  `DROP TABLE IF EXISTS rg_base_snapshot;`,
  // v6: the (agent, seq) index of v1 served no query (every read goes by seq or completion_id), and every record
  // paid for it: one more B-tree insert in the commit (docs/hot-path.md, fifth pass).
  `DROP INDEX IF EXISTS rg_completions_agent;`,
]

export const SCHEMA_VERSION = MIGRATIONS.length

export function ensureSchema(sql: Sql): void {
  sql.run('CREATE TABLE IF NOT EXISTS rg_schema (version INTEGER NOT NULL)')
  const row = sql.first<{ version: number }>('SELECT version FROM rg_schema')
  const current = row?.version ?? 0
  if (current >= SCHEMA_VERSION) return
  for (let version = current; version < SCHEMA_VERSION; version++) {
    for (const statement of (MIGRATIONS[version] as string).split(';')) {
      if (statement.trim()) sql.run(statement)
    }
  }
  if (row) sql.run('UPDATE rg_schema SET version = ?', SCHEMA_VERSION)
  else sql.run('INSERT INTO rg_schema (version) VALUES (?)', SCHEMA_VERSION)
}
