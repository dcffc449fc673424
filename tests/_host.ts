/**
 * Shared setup for the host-queue tests (auto-publish, SEO backfill): the real API with both
 * queues' routes on a test schema, editions, and row readers.
 *
 * @module
 */
import { createApi } from "../lib/http/api.ts";
import { EventHub } from "../lib/events.ts";
import { Lifecycle } from "../lib/lifecycle.ts";
import { createLogger } from "../lib/log.ts";
import type { Sql } from "../lib/db.ts";
import { autoPublishRoutes } from "../queues/auto_publish/routes.ts";
import { seoRoutes } from "../queues/seo_backfill/routes.ts";
import type { AutoPublishContext } from "../queues/auto_publish/mod.ts";
import type { SeoContext } from "../queues/seo_backfill/mod.ts";
import type { TestDb } from "./_db.ts";

/** The bearer token of {@linkcode hostApi}. */
export const HOST_TOKEN = "host-test-token-0123456789";

/**
 * The API with the host queues' routes, completes recording IndexNow pings; `announced()` reads
 * the editions whose ping the outbox holds, in recording order.
 */
export function hostApi(db: Pick<TestDb, "sql">, options: { staleAfterMs?: number } = {}) {
  const log = createLogger(Deno.env.get("TEST_LOG_LEVEL") ?? "silent");
  const events = new EventHub();
  const autoCtx: AutoPublishContext = {
    sql: db.sql,
    log,
    events,
    indexNow: true,
  };
  const seoCtx: SeoContext = {
    sql: db.sql,
    log,
    events,
    staleAfterMs: options.staleAfterMs ?? 3_600_000,
  };
  const app = createApi({
    token: HOST_TOKEN,
    log,
    events,
    lifecycle: new Lifecycle(log, 2000),
    health: async () => (await db.sql`select 1`, {}),
    routes: { "/auto-publish": autoPublishRoutes(autoCtx), "/seo": seoRoutes(seoCtx) },
  });
  /** Send a request; a non-string body is sent as JSON. */
  const call = (method: string, path: string, body?: unknown, headers?: Record<string, string>) =>
    app.request(`/internal${path}`, {
      method,
      headers: headers ??
        {
          authorization: `Bearer ${HOST_TOKEN}`,
          ...(body === undefined ? {} : { "content-type": "application/json" }),
        },
      body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
    });
  const announced = async () =>
    (await db.sql<{ edition: string }[]>`
      select payload->>'edition_id' as edition from outbox where kind = 'indexnow' order by id`)
      .map((r) => r.edition);
  return { app, call, announced, autoCtx, seoCtx, events };
}

/** Insert an edition (with one chapter) directly; returns its id. */
export async function insertEdition(
  sql: Sql,
  title = "The Test Book",
  author: string | null = "Ada Tester",
): Promise<string> {
  const [row] = await sql<{ id: string }[]>`
    insert into editions (title, author, format) values (${title}, ${author}, 'txt') returning id`;
  await sql`
    insert into chapters (edition_id, position, title, html)
    values (${row.id}, 1, 'Chapter I', '<p>It was a bright <em>cold</em> day.</p>')`;
  return row.id;
}

/** Every row of a table, in id order, for "nothing changed" comparisons. */
export async function snapshot(sql: Sql, table: string): Promise<unknown[]> {
  return [...await sql`select * from ${sql(table)} order by 1`];
}

/** Make `count` Failed auto-publish jobs for an edition, finished `hoursAgo` hours ago. */
export async function insertFailures(
  sql: Sql,
  editionId: string,
  count: number,
  hoursAgo: number,
): Promise<void> {
  for (let i = 0; i < count; i++) {
    await sql`
      insert into auto_publish_jobs (edition_id, status, attempt_count, error, finished_at)
      values (${editionId}, 'Failed', 1, 'boom',
              now() - ${hoursAgo} * interval '1 hour' + ${i} * interval '1 minute')`;
  }
}

/**
 * The spawned worker's base URL, waiting up to 60 s for "http listening" (the shared 15 s default
 * is too short on a loaded CI machine running several workers' tests at once).
 */
export async function listening(
  worker: {
    waitForLog(
      msg: string,
      match?: Record<string, unknown>,
      timeoutMs?: number,
    ): Promise<Record<string, unknown>>;
  },
): Promise<string> {
  const line = await worker.waitForLog("http listening", {}, 60_000);
  return `http://127.0.0.1:${line.port}`;
}
