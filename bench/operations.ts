/**
 * The operations section of `deno task bench` (`--operations`): the operator's reads and the
 * bulk retry on a big queue. An ingestion table with 1,000,000 finished jobs (`Completed`, and
 * 10,000 `Failed` among them, spread through it) and 50 `Queued`, in a schema of its own, migrated,
 * filled with INSERT … generate_series and `vacuum analyze`d. Then, through the real route
 * builders (Hono's `app.request`, no socket): the list route (first page, a deep page by its
 * cursor, each status, a search), the dashboard's queue page, a filtered one and a job page; each
 * `ROUNDS` times, the median and the slowest reported. Target: every one within 100 ms (keyset
 * pages and partial indexes, no `count(*)` over the table). A search is a filter on that walk, not
 * an index: when fewer jobs match than fill a page it reads the whole table, and is reported as
 * such, outside the target. Last, a bulk retry of the 10,000
 * `Failed` jobs: its time and the statements it sent (target: one).
 *
 * @module
 */
import { connect } from "../lib/db.ts";
import { createLogger } from "../lib/log.ts";
import { EventHub } from "../lib/events.ts";
import { migrate, readMigrations } from "../lib/migrate.ts";
import { Lifecycle } from "../lib/lifecycle.ts";
import { QueueControl } from "../lib/control.ts";
import { createApi } from "../lib/http/api.ts";
import { StatsCache } from "../lib/admin/stats_cache.ts";
import { adminRoutes } from "../lib/admin/dashboard.tsx";
import { ingestionRoutes } from "../queues/ingestion/routes.ts";
import { ingestionView } from "../queues/ingestion/view.ts";
import * as ingestionJobs from "../queues/ingestion/jobs.ts";

const FINISHED = 1_000_000;
const FAILED_EVERY = 100; // 10,000 Failed among the finished rows
const ROUNDS = 20;
const TOKEN = "bench-operations-token-0123456789";

/** One read's timings, ms. */
export interface OperationTiming {
  what: string;
  medianMs: number;
  maxMs: number;
}

/**
 * Run the operations section against `url` (a superuser or the schema's owner).
 *
 * @returns the reads' timings and the bulk retry's.
 */
export async function operationsBench(url: string): Promise<{
  reads: OperationTiming[];
  bulk: { retried: number; ms: number; statements: number };
}> {
  const schema = `bench_ops_${crypto.randomUUID().slice(0, 8)}`;
  const log = createLogger("silent");
  const sql = connect(url, { schema, applicationName: "bench-operations", max: 4 });
  try {
    await migrate(sql, schema, await readMigrations(new URL("../sql/", import.meta.url)), log);
    console.log(`operations: filling ${FINISHED.toLocaleString("en")} finished jobs…`);
    await sql.unsafe(`
      insert into ingestion_jobs (source_path, status, attempt_count, error, finished_at)
      select 'books/' || i || '.txt',
             case when i % ${FAILED_EVERY} = 0 then 'Failed' else 'Completed' end, 1,
             case when i % ${FAILED_EVERY} = 0 then 'unreadable' end,
             now() - interval '1 day'
      from generate_series(1, ${FINISHED}) i`);
    await sql.unsafe(`
      insert into ingestion_jobs (source_path) select 'new/' || i || '.txt'
      from generate_series(1, 50) i`);
    await sql.unsafe("vacuum analyze ingestion_jobs");
    const events = new EventHub();
    const ctx = {
      sql,
      log,
      bootId: crypto.randomUUID(),
      events,
      storageDir: "/nonexistent",
      staleAfterMs: 600_000,
    };
    const control = new QueueControl({ sql, schema, log });
    await control.refresh();
    const lifecycle = new Lifecycle(log, 2000);
    const cache = new StatsCache({ sql, schema, views: [ingestionView], log });
    const app = createApi({
      token: TOKEN,
      log,
      events,
      lifecycle,
      health: () => Promise.resolve({}),
      routes: { "/ingestion": ingestionRoutes(ctx, control) },
      apps: [
        adminRoutes({
          token: TOKEN,
          views: [ingestionView],
          cache,
          ctx,
          control,
          locks: new Map(),
          events,
          lifecycle,
          log,
        }),
      ],
    });
    const login = await app.request("http://bench/admin/login", {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", origin: "http://bench" },
      body: `token=${TOKEN}`,
    });
    const cookie = (login.headers.get("set-cookie") ?? "").split(";")[0];
    const get = async (path: string) => {
      const res = await app.request(`http://bench${path}`, {
        headers: path.startsWith("/admin") ? { cookie } : { authorization: `Bearer ${TOKEN}` },
      });
      if (res.status !== 200) throw new Error(`${path}: ${res.status} ${await res.text()}`);
      return res;
    };
    // A cursor deep in the table: the page after job 500,000.
    const deep = (await (await get("/internal/ingestion/jobs?limit=50")).json()).next_cursor;
    const deepCursor = btoa("id:500000").replace(/=+$/, "");
    const [{ id: someJob }] = await sql<{ id: string }[]>`
      select id from ingestion_jobs where id = 123456`;
    const reads: [string, string][] = [
      ["list, first page", "/internal/ingestion/jobs?limit=50"],
      ["list, next page", `/internal/ingestion/jobs?limit=50&cursor=${deep}`],
      ["list, page at job 500,000", `/internal/ingestion/jobs?limit=50&cursor=${deepCursor}`],
      ["list, Failed", "/internal/ingestion/jobs?status=Failed&limit=50"],
      ["list, Queued", "/internal/ingestion/jobs?status=Queued&limit=50"],
      ["list, Processing (none)", "/internal/ingestion/jobs?status=Processing&limit=50"],
      ["list, search, 50 recent matches", "/internal/ingestion/jobs?q=new/&limit=20"],
      // Fewer matches than a page: the scan walks the whole table looking for more.
      ["list, search, no match (walks all)", "/internal/ingestion/jobs?q=nowhere&limit=20"],
      ["dashboard queue page", "/admin/queues/ingestion"],
      ["dashboard queue page, Failed", "/admin/queues/ingestion?status=Failed"],
      ["dashboard job page", `/admin/queues/ingestion/jobs/${someJob}`],
      ["dashboard bulk retry count", "/admin/queues/ingestion/retry"],
    ];
    const timings: OperationTiming[] = [];
    for (const [what, path] of reads) {
      const ms: number[] = [];
      for (let i = 0; i < ROUNDS; i++) {
        const t0 = performance.now();
        await (await get(path)).arrayBuffer();
        ms.push(performance.now() - t0);
      }
      ms.sort((a, b) => a - b);
      timings.push({ what, medianMs: ms[Math.floor(ms.length / 2)], maxMs: ms[ms.length - 1] });
    }
    // The bulk retry, on a connection of its own whose statements are counted.
    const statements: string[] = [];
    const counted = connect(url, { schema, applicationName: "bench-operations", max: 1 });
    // postgres.js calls `options.debug` with every query it sends.
    (counted.options as { debug?: unknown }).debug = (_c: number, query: string) =>
      statements.push(query);
    await counted`select 1`; // the driver's own type lookups, before the count
    statements.length = 0;
    const t0 = performance.now();
    const outcome = await ingestionJobs.bulkRetry(
      { ...ctx, sql: counted },
      { status: "Failed" },
      false,
    );
    const bulkMs = performance.now() - t0;
    await counted.end({ timeout: 1 });
    return {
      reads: timings,
      bulk: { retried: outcome.retried, ms: bulkMs, statements: statements.length },
    };
  } finally {
    await sql`drop schema if exists ${sql(schema)} cascade`;
    await sql.end({ timeout: 1 });
  }
}

/** Print the section's table; exits 1 when a read misses its 100 ms. */
export function printOperations(
  result: Awaited<ReturnType<typeof operationsBench>>,
): boolean {
  console.log(
    "\noperations (1,000,000 finished ingestion jobs; target: each read ≤ 100 ms, a search " +
      "with fewer matches than a page excepted)",
  );
  console.log("read                              median ms   max ms");
  for (const r of result.reads) {
    console.log(
      `${r.what.padEnd(32)}  ${r.medianMs.toFixed(1).padStart(9)}  ${
        r.maxMs.toFixed(1).padStart(7)
      }`,
    );
  }
  const b = result.bulk;
  console.log(
    `bulk retry: ${b.retried} jobs in ${b.ms.toFixed(0)} ms, ${b.statements} statement(s)`,
  );
  return result.reads.every((r) => r.medianMs <= 100 || r.what.includes("walks all")) &&
    b.statements === 1;
}

if (import.meta.main) {
  const url = Deno.env.get("DATABASE_URL");
  if (!url) throw new Error("DATABASE_URL is unset: the operations bench needs a server");
  Deno.exit(printOperations(await operationsBench(url)) ? 0 : 1);
}
