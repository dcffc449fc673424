/**
 * The scale section of `deno task bench` (issue 11): what the ingestion queue's claim and its
 * recovery sweep cost on an empty table, with 1,000,000 finished rows, and with 100,000 `Queued`
 * rows. Target: within 1.2× of the empty table.
 *
 * Each table is in a schema of its own, migrated, filled with one INSERT … generate_series and
 * `vacuum analyze`d. Then, as the worker's role, {@linkcode CALLS} claims (each of a row the
 * observer put first in line and completes afterwards, as a run would) and as many `recover()`
 * calls; `pg_stat_statements` (reset before each) gives the server's execution time and the
 * shared buffers each call touched. Buffers are the stable figure on a loaded machine (the same
 * plan on the same data touches the same pages); the time is shown beside them.
 *
 * With a checkout (`--checkout <dir>`), that checkout's migrations and `queues/ingestion.ts` are
 * measured instead, to compare before and after on the same server.
 *
 * @module
 */
import { connect, type Sql } from "../lib/db.ts";
import { createLogger } from "../lib/log.ts";
import { EventHub } from "../lib/events.ts";
import { migrate, readMigrations } from "../lib/migrate.ts";
import type * as Ingestion from "../queues/ingestion.ts";
import { progress } from "./_observer.ts";

/** Claims and recoveries measured per table. */
export const CALLS = 300;
const FINISHED_ROWS = 1_000_000;
const QUEUED_ROWS = 100_000;

/** One statement group's cost per call. */
export interface Per {
  ms: number;
  buffers: number;
}

/** What one table measured. */
export interface ScaleRow {
  table: string;
  claim: Per;
  recover: Per;
}

/**
 * Run the scale section.
 *
 * @param url superuser URL of the server (the worker's role).
 * @param observerUrl the same server as `bench_observer` (for the fills and the readings).
 * @param checkout a checkout directory to measure instead of this one (its `sql/` and
 *   `queues/ingestion.ts`).
 * @returns one row per table: empty, 1M finished, 100k queued.
 */
export async function scaleBench(
  url: string,
  observerUrl: string,
  checkout?: string,
): Promise<ScaleRow[]> {
  const root = checkout
    ? new URL(`file://${Deno.realPathSync(checkout)}/`)
    : new URL("../", import.meta.url);
  const ingestion: typeof Ingestion = await import(new URL("queues/ingestion.ts", root).href);
  const migrations = await readMigrations(new URL("sql/", root));
  const workerRole = new URL(url).username;
  const tables = [
    { table: "empty", fill: "" },
    {
      table: `${FINISHED_ROWS.toLocaleString("en")} finished`,
      fill: `insert into ingestion_jobs (source_path, status, attempt_count, finished_at)
             select 'f.txt', 'Completed', 1, now() - interval '1 day'
             from generate_series(1, ${FINISHED_ROWS})`,
    },
    {
      table: `${QUEUED_ROWS.toLocaleString("en")} queued`,
      fill: `insert into ingestion_jobs (source_path) select 'q.txt'
             from generate_series(1, ${QUEUED_ROWS})`,
    },
  ];
  const rows: ScaleRow[] = [];
  for (const { table, fill } of tables) {
    progress(`scale: claim and recover on a table with ${table} rows`);
    const schema = `bench_scale_${crypto.randomUUID().slice(0, 8)}`;
    const obs = connect(observerUrl, { schema, applicationName: "bench", max: 1 });
    const sql = connect(url, { schema, applicationName: "bench-scale", max: 1 });
    try {
      await migrate(obs, schema, migrations, createLogger("silent"));
      if (fill) await obs.unsafe(fill);
      await obs.unsafe("vacuum analyze ingestion_jobs");
      const ctx = {
        sql,
        log: createLogger("silent"),
        bootId: crypto.randomUUID(),
        events: new EventHub(),
        storageDir: await Deno.makeTempDir({ prefix: "textstack-bench-scale-" }),
        staleAfterMs: 600_000,
      };
      // Warm the plans and the caches, then measure.
      await claimOnce(obs, ctx, ingestion);
      await ingestion.recover(ctx, new AbortController().signal);
      await reset(obs);
      for (let i = 0; i < CALLS; i++) await claimOnce(obs, ctx, ingestion);
      const claim = await per(obs, workerRole);
      await reset(obs);
      for (let i = 0; i < CALLS; i++) await ingestion.recover(ctx, new AbortController().signal);
      const recover = await per(obs, workerRole);
      rows.push({ table, claim, recover });
      await Deno.remove(ctx.storageDir, { recursive: true });
    } finally {
      await sql.end({ timeout: 5 });
      await obs`drop schema if exists ${obs(schema)} cascade`;
      await obs.end({ timeout: 5 });
    }
  }
  return rows;
}

// One claim, as the consumer makes it: a job first in line (new, or the oldest of the backlog),
// claimed by the worker's role, then completed by the observer as a run would complete it.
async function claimOnce(
  obs: Sql,
  ctx: Ingestion.IngestionContext,
  ingestion: typeof Ingestion,
): Promise<void> {
  const [{ n }] = await obs<{ n: number }[]>`
    select count(*)::int as n from (
      select from ingestion_jobs where status = 'Queued' limit 1) q`;
  if (n === 0) await obs`insert into ingestion_jobs (source_path) values ('one.txt')`;
  const job = await ingestion.claim(ctx);
  if (!job) throw new Error("The scale bench's claim took nothing");
  await obs`
    update ingestion_jobs set status = 'Completed', claimed_by = null, finished_at = now()
    where id = ${job.id}`;
}

async function reset(obs: Sql): Promise<void> {
  await obs`select public.pg_stat_statements_reset()`;
}

// The worker role's statements since the reset, per call of the measured verb.
async function per(obs: Sql, workerRole: string): Promise<Per> {
  const [row] = await obs<{ ms: number; buffers: number }[]>`
    select coalesce(sum(total_exec_time), 0)::float8 / ${CALLS} as ms,
           coalesce(sum(shared_blks_hit + shared_blks_read), 0)::float8 / ${CALLS} as buffers
    from public.pg_stat_statements
    where toplevel and userid = (select oid from pg_roles where rolname = ${workerRole})`;
  return { ms: row.ms, buffers: row.buffers };
}

/** Print the scale table with each ratio to the empty table. */
export function printScale(rows: ScaleRow[]): { pass: boolean } {
  const [empty] = rows;
  const ratio = (a: number, b: number) => (b === 0 ? (a === 0 ? 1 : Infinity) : a / b);
  let pass = true;
  console.log(
    `\nscale: ingestion claim and recover() per call (${CALLS} calls each; buffers = shared ` +
      `blocks hit + read; target ≤ 1.2× the empty table, judged on buffers)`,
  );
  for (const r of rows) {
    const cb = ratio(r.claim.buffers, empty.claim.buffers);
    const rb = ratio(r.recover.buffers, empty.recover.buffers);
    const ct = ratio(r.claim.ms, empty.claim.ms);
    const rt = ratio(r.recover.ms, empty.recover.ms);
    const ok = cb <= 1.2 && rb <= 1.2;
    if (r !== empty) pass &&= ok;
    console.log(
      `  ${r.table.padEnd(18)} claim ${r.claim.buffers.toFixed(1).padStart(8)} buf ` +
        `${r.claim.ms.toFixed(3)} ms (${cb.toFixed(2)}×, time ${ct.toFixed(2)}×)   ` +
        `recover ${r.recover.buffers.toFixed(1).padStart(8)} buf ${r.recover.ms.toFixed(3)} ms ` +
        `(${rb.toFixed(2)}×, time ${rt.toFixed(2)}×)${r === empty ? "" : ok ? "  pass" : "  FAIL"}`,
    );
  }
  return { pass };
}
