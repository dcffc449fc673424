/**
 * The scale section of `deno task bench`: what the ingestion queue's claim and its
 * recovery sweep cost on an empty table, with 1,000,000 finished rows, and with 100,000 `Queued`
 * rows. Target: within 1.2× of the empty table.
 *
 * Each table is in a schema of its own, migrated, filled with one INSERT … generate_series and
 * `vacuum analyze`d, and claimed from by a role of its own (`bench_scale_<n>`), so that
 * `pg_stat_statements` keeps each table's figures apart while the three are measured in
 * interleaved rounds (a burst of load on the machine hits all three alike). Each round makes one
 * claim per table (of a row the observer put first in line and completes afterwards, as a run
 * would), {@linkcode CALLS} rounds; then as many rounds of `recover()`. The figures are the
 * server's mean execution time per call and the shared buffers it touched; the target is judged on
 * the buffers. A claim takes a quarter of a millisecond and a recovery a few microseconds: on a
 * loaded 2-core machine their times vary between runs by more than the 20% the target allows,
 * while what grows with a backlog shows in the buffers at once (a sweep reading every row touched
 * 1,140 buffers, 11 ms, with 100,000 queued rows), and a B-tree one level deeper costs one buffer
 * per descent whatever the backlog.
 *
 * With a checkout (`--checkout <dir>`), that checkout's migrations and `queues/ingestion/mod.ts` are
 * measured instead, to compare before and after on the same server.
 *
 * @module
 */
import { connect, type Sql } from "../lib/db.ts";
import { createLogger } from "../lib/log.ts";
import { EventHub } from "../lib/events.ts";
import { migrate, readMigrations } from "../lib/migrate.ts";
import type * as Ingestion from "../queues/ingestion/mod.ts";
import { progress } from "./_observer.ts";

/** Interleaved rounds of claims, then of recoveries. */
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

type Ctx = Ingestion.IngestionContext;

/**
 * Run the scale section.
 *
 * @param url superuser URL of the server (its host and port; each table gets a role of its own).
 * @param observerUrl the same server as `bench_observer` (for the fills and the readings).
 * @param checkout a checkout directory to measure instead of this one (its `sql/` and
 *   `queues/ingestion/mod.ts`).
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
  const ingestion: typeof Ingestion = await import(new URL("queues/ingestion/mod.ts", root).href);
  const migrations = await readMigrations(new URL("sql/", root));
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
  const log = createLogger("silent");
  const states: Array<{ table: string; role: string; schema: string; obs: Sql; ctx: Ctx }> = [];
  const admin = connect(observerUrl, { schema: "public", applicationName: "bench", max: 1 });
  try {
    for (const [i, { table, fill }] of tables.entries()) {
      progress(`scale: a table with ${table} rows`);
      const role = `bench_scale_${i}`;
      const [exists] = await admin`select 1 from pg_roles where rolname = ${role}`;
      if (!exists) await admin.unsafe(`create role ${role} login superuser password '${role}'`);
      const schema = `bench_scale_${crypto.randomUUID().slice(0, 8)}`;
      const obs = connect(observerUrl, { schema, applicationName: "bench", max: 1 });
      await migrate(obs, schema, migrations, log);
      if (fill) await obs.unsafe(fill);
      await obs.unsafe("vacuum analyze ingestion_jobs");
      const roleUrl = new URL(url);
      roleUrl.username = role;
      roleUrl.password = role;
      const ctx: Ctx = {
        sql: connect(roleUrl.href, { schema, applicationName: "bench-scale", max: 1 }),
        log,
        bootId: crypto.randomUUID(),
        events: new EventHub(),
        storageDir: await Deno.makeTempDir({ prefix: "textstack-bench-scale-" }),
        staleAfterMs: 600_000,
      };
      states.push({ table, role, schema, obs, ctx });
      // Warm the plans and the caches.
      await claimOnce(obs, ctx, ingestion);
      await ingestion.recover(ctx, new AbortController().signal);
    }
    progress(`scale: ${CALLS} interleaved rounds of claims, then of recover()`);
    await reset(admin);
    for (let i = 0; i < CALLS; i++) {
      for (const { obs, ctx } of states) await claimOnce(obs, ctx, ingestion);
    }
    const claims = await Promise.all(states.map((s) => per(admin, s.role)));
    await reset(admin);
    for (let i = 0; i < CALLS; i++) {
      for (const { ctx } of states) await ingestion.recover(ctx, new AbortController().signal);
    }
    const recovers = await Promise.all(states.map((s) => per(admin, s.role)));
    return states.map((s, i) => ({ table: s.table, claim: claims[i], recover: recovers[i] }));
  } finally {
    for (const { obs, ctx, schema } of states) {
      await ctx.sql.end({ timeout: 5 });
      await Deno.remove(ctx.storageDir, { recursive: true });
      await obs`drop schema if exists ${obs(schema)} cascade`;
      await obs.end({ timeout: 5 });
    }
    await admin.end({ timeout: 5 });
  }
}

// One claim, as the consumer makes it: a job first in line (new, or the oldest of the backlog),
// claimed by the worker's role, then completed by the observer as a run would complete it.
async function claimOnce(
  obs: Sql,
  ctx: Ctx,
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

// A role's statements since the reset, per call of the measured verb.
async function per(obs: Sql, role: string): Promise<Per> {
  const [row] = await obs<{ ms: number; buffers: number }[]>`
    select coalesce(sum(total_exec_time), 0)::float8 / ${CALLS} as ms,
           coalesce(sum(shared_blks_hit + shared_blks_read), 0)::float8 / ${CALLS} as buffers
    from public.pg_stat_statements
    where toplevel and userid = (select oid from pg_roles where rolname = ${role})`;
  return { ms: row.ms, buffers: row.buffers };
}

/** Print the scale table with each ratio to the empty table. */
export function printScale(rows: ScaleRow[]): { pass: boolean } {
  const [empty] = rows;
  const ratio = (a: number, b: number) => (b === 0 ? (a === 0 ? 1 : Infinity) : a / b);
  let pass = true;
  console.log(
    `\nscale: ingestion claim and recover() per call (${CALLS} interleaved rounds; server time; ` +
      `buffers = shared blocks hit + read; target ≤ 1.2× the empty table, judged on buffers)`,
  );
  for (const r of rows) {
    const ct = ratio(r.claim.ms, empty.claim.ms);
    const rt = ratio(r.recover.ms, empty.recover.ms);
    const cb = ratio(r.claim.buffers, empty.claim.buffers);
    const rb = ratio(r.recover.buffers, empty.recover.buffers);
    const ok = cb <= 1.2 && rb <= 1.2;
    if (r !== empty) pass &&= ok;
    console.log(
      `  ${r.table.padEnd(18)} claim ${r.claim.ms.toFixed(3)} ms ${ct.toFixed(2)}× ` +
        `(${r.claim.buffers.toFixed(1)} buf ${cb.toFixed(2)}×)   recover ` +
        `${r.recover.ms.toFixed(3)} ms ${rt.toFixed(2)}× (${r.recover.buffers.toFixed(1)} buf ` +
        `${rb.toFixed(2)}×)${r === empty ? "" : ok ? "  pass" : "  FAIL"}`,
    );
  }
  return { pass };
}
