/**
 * Migrations: `sql/NNN_name.sql` files applied in order, once each, under a transaction-scoped
 * advisory lock so two processes starting together never apply one twice. Applied versions are
 * recorded in `schema_migrations`.
 *
 * @module
 */
import type { Logger } from "./log.ts";
import type { Sql } from "./db.ts";

/** One migration file. */
export interface Migration {
  /** The file's number, e.g. 1 for `001_ingestion.sql`. */
  version: number;
  /** The file name. */
  name: string;
  /** Its SQL text (DDL; no values are interpolated). */
  text: string;
}

/**
 * Read the migrations in a directory.
 *
 * @param dir a directory URL or path holding `NNN_name.sql` files.
 * @returns the migrations sorted by version.
 * @throws Error when a `.sql` file name does not start with a number, or two share one.
 * @example
 * const migrations = await readMigrations(new URL("../sql/", import.meta.url));
 */
export async function readMigrations(dir: URL | string): Promise<Migration[]> {
  const migrations: Migration[] = [];
  for await (const entry of Deno.readDir(dir)) {
    if (!entry.isFile || !entry.name.endsWith(".sql")) continue;
    const match = /^(\d+)_[a-z0-9_]+\.sql$/.exec(entry.name);
    if (!match) throw new Error(`Cannot read migration "${entry.name}": expected NNN_name.sql`);
    const text = await Deno.readTextFile(
      new URL(entry.name, dir instanceof URL ? dir : `file://${dir}/`),
    );
    migrations.push({ version: Number(match[1]), name: entry.name, text });
  }
  migrations.sort((a, b) => a.version - b.version);
  for (let i = 1; i < migrations.length; i++) {
    if (migrations[i].version === migrations[i - 1].version) {
      throw new Error(
        `Cannot order migrations: "${migrations[i - 1].name}" and "${
          migrations[i].name
        }" share a number`,
      );
    }
  }
  return migrations;
}

/**
 * Apply every migration not yet recorded, in order, in one transaction.
 *
 * @param sql a client whose `search_path` starts with the target schema.
 * @param schema the target schema (created when missing); also scopes the advisory lock.
 * @param migrations from {@linkcode readMigrations}.
 * @param log receives one line per applied migration.
 * A database that is up to date is only read, never written: a read-only database (a standby, a
 * role with `default_transaction_read_only`) boots when nothing is to be applied.
 *
 * @returns the versions applied by this call (empty when up to date).
 * @throws the database error of a failing migration; nothing of the batch is kept.
 * @example
 * await migrate(sql, "public", await readMigrations(dir), log);
 */
export async function migrate(
  sql: Sql,
  schema: string,
  migrations: Migration[],
  log: Logger,
): Promise<number[]> {
  if ((await pendingVersions(sql, schema, migrations)).length === 0) return [];
  const applied: number[] = [];
  await sql.begin(async (tx) => {
    await tx`select pg_advisory_xact_lock(hashtextextended(${`textstack:migrate:${schema}`}, 0))`;
    await tx`create schema if not exists ${tx(schema)}`;
    await tx`set local search_path to ${tx(schema)}`;
    await tx`
      create table if not exists schema_migrations (
        version integer primary key,
        name text not null,
        applied_at timestamptz not null default now()
      )`;
    const done = new Set(
      (await tx<{ version: number }[]>`select version from schema_migrations`).map((r) =>
        r.version
      ),
    );
    for (const m of migrations) {
      if (done.has(m.version)) continue;
      await tx.unsafe(m.text);
      await tx`insert into schema_migrations (version, name) values (${m.version}, ${m.name})`;
      log.info({ version: m.version, name: m.name }, "migration applied");
      applied.push(m.version);
    }
  });
  return applied;
}

// The versions not yet recorded, read without any write (no lock, no DDL).
async function pendingVersions(
  sql: Sql,
  schema: string,
  migrations: Migration[],
): Promise<number[]> {
  const [{ exists }] = await sql<{ exists: boolean }[]>`
    select to_regclass(format('%I.schema_migrations', ${schema}::text)) is not null as exists`;
  if (!exists) return migrations.map((m) => m.version);
  const done = new Set(
    (await sql<{ version: number }[]>`select version from ${sql(schema)}.schema_migrations`)
      .map((r) => r.version),
  );
  return migrations.map((m) => m.version).filter((v) => !done.has(v));
}
