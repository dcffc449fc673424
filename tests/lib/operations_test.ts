/**
 * Operating the queues through the API: list (keyset pages, search), cancel, bulk retry, the
 * attempt history and pause, on real PostgreSQL; a cancel and a pause reach a consumer through
 * NOTIFY on another connection, as between two instances.
 *
 * @module
 */
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { connect } from "../../lib/db.ts";
import { CANCEL_WAIT_MS, QueueControl } from "../../lib/control.ts";
import { encodeCursor } from "../../lib/http/list.ts";
import { Listener } from "../../lib/listener.ts";
import { BULK_RETRY_MAX, CANCELLED } from "../../lib/queue.ts";
import { ingestionRoutes } from "../../queues/ingestion/routes.ts";
import * as ingestion from "../../queues/ingestion/mod.ts";
import * as ingestionJobs from "../../queues/ingestion/jobs.ts";
import * as autoPublish from "../../queues/auto_publish/mod.ts";
import * as autoPublishJobs from "../../queues/auto_publish/jobs.ts";
import * as seoJobs from "../../queues/seo_backfill/jobs.ts";
import { autoPublishRoutes } from "../../queues/auto_publish/routes.ts";
import { seoRoutes } from "../../queues/seo_backfill/routes.ts";
import { userBookRoutes } from "../../queues/user_ingestion/routes.ts";
import { enrichmentRoutes } from "../../queues/enrichment/routes.ts";
import { ssgRoutes } from "../../queues/ssg/routes.ts";
import { queuesRoutes } from "../../lib/http/queues.ts";
import { ingestionView } from "../../queues/ingestion/view.ts";
import { autoPublishView } from "../../queues/auto_publish/view.ts";
import { testApi, testControl } from "../_api.ts";
import { dbTest, type TestDb, waitFor, within } from "../_db.ts";
import {
  ingestionContext,
  insertJob,
  jobRow,
  SMALL_BOOK,
  startConsumer,
  writeSource,
} from "../_ingestion.ts";
import type { IngestionContext } from "../../queues/ingestion/mod.ts";

const TOKEN = "operations-test-token-0123456789";
const auth = { authorization: `Bearer ${TOKEN}` };

function api(db: TestDb, ctx: IngestionContext, control = testControl(ctx, db.schema)) {
  const app = testApi(ctx as IngestionContext & { events: never }, TOKEN, {
    routes: {
      "/ingestion": ingestionRoutes(ctx, control),
      "/ssg": ssgRoutes(ctx, control),
      "/auto-publish": autoPublishRoutes({ ...ctx, indexNow: false }),
      "/seo": seoRoutes({ ...ctx, staleAfterMs: 3_600_000 }),
      "/user-books": userBookRoutes({ ...ctx, staleAfterMs: 120_000 }, 1024, control),
      "/enrichment": enrichmentRoutes(ctx, control),
      "/queues": queuesRoutes({
        views: [ingestionView, autoPublishView],
        cache: { snapshot: undefined },
        control,
        consumerState: () => "holding",
      }),
    },
  });
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await app.request(`/internal${path}`, {
      method,
      headers: body === undefined ? auth : { ...auth, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, body: await res.json() };
  };
  return { app, call, control };
}

async function insertEditions(db: TestDb, n: number): Promise<string[]> {
  const rows = await db.sql<{ id: string }[]>`
    insert into editions (title, format)
    select 'Edition ' || i, 'txt' from generate_series(1, ${n}) i
    returning id`;
  return rows.map((r) => r.id);
}

// A small deterministic generator, so a failing case can be replayed from its seed.
function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => ((s = (s * 1664525 + 1013904223) >>> 0) / 2 ** 32);
}

dbTest(
  "GET /internal/ingestion/jobs pages newest first by an opaque cursor; jobs added meanwhile never shift a page; status and q filter",
  async (db) => {
    const ctx = await ingestionContext(db);
    const { call } = api(db, ctx);
    const STATUSES = ["Queued", "Processing", "Completed", "Failed"];
    for (const seed of [1, 2, 3]) {
      await db.sql`delete from ingestion_jobs`;
      const next = random(seed);
      const n = 20 + Math.floor(next() * 40);
      const rows = Array.from({ length: n }, (_, i) => ({
        source_path: `${next() < 0.3 ? "moby" : "books"}/${seed}-${i}.txt`,
        status: STATUSES[Math.floor(next() * 4)],
      }));
      await db.sql`insert into ingestion_jobs ${db.sql(rows)}`;
      const filters: { status?: string; q?: string }[] = [
        {},
        { status: "Failed" },
        { q: "MOBY" },
        { status: "Queued", q: "moby" },
      ];
      for (const filter of filters) {
        const limit = 1 + Math.floor(next() * 7);
        const expected = (await db.sql<{ id: string }[]>`
          select id from ingestion_jobs
          where (${filter.status ?? null}::text is null or status = ${filter.status ?? null})
            and (${filter.q ?? null}::text is null
                 or source_path ilike '%' || ${filter.q ?? null} || '%')
          order by id desc`).map((r) => r.id);
        const seen: string[] = [];
        let cursor: string | null = null;
        for (let page = 0; page < 100; page++) {
          const query = new URLSearchParams({
            ...filter as Record<string, string>,
            limit: String(limit),
          });
          if (cursor) query.set("cursor", cursor);
          const { status, body } = await call("GET", `/ingestion/jobs?${query}`);
          assert.equal(status, 200);
          assert.ok(body.jobs.length <= limit);
          seen.push(...body.jobs.map((j: { id: string }) => j.id));
          // A job added between pages is newer than every page read so far: never in a later one.
          await insertJob(db, `moby/added-${seed}-${page}.txt`);
          cursor = body.next_cursor;
          if (!cursor) break;
        }
        assert.deepEqual(seen, expected, `seed ${seed}, ${JSON.stringify(filter)}, limit ${limit}`);
      }
    }
    const bad = await call("GET", "/ingestion/jobs?cursor=not-a-cursor");
    assert.equal(bad.status, 400);
    assert.match(bad.body.error, /cursor/);
    assert.equal((await call("GET", "/ingestion/jobs?status=Nope")).status, 400);
    assert.equal((await call("GET", "/ingestion/jobs?limit=201")).status, 400);
  },
);

dbTest(
  "every queue's list route takes status, q, limit and cursor, and searches its subject",
  async (db) => {
    const ctx = await ingestionContext(db);
    const { call } = api(db, ctx);
    const [edition, other] = await insertEditions(db, 2);
    await db.sql`update editions set title = 'Moby Dick' where id = ${edition}`;
    await db.sql`insert into auto_publish_jobs (edition_id, status) values
      (${edition}, 'Failed'), (${other}, 'Failed')`;
    await db.sql`insert into seo_backfill_jobs (edition_id) values (${edition}), (${other})`;
    await db.sql`insert into ssg_rebuild_jobs (status) values ('Failed'), ('Completed')`;
    const [book] = await db.sql<{ id: string }[]>`
      insert into user_books (owner_id, title, status, metadata_enrichment_status)
      values (7, 'Moby Dick', 'Ready', 'Failed') returning id`;
    await db.sql`insert into user_books (owner_id, title, status, metadata_enrichment_status)
      values (7, 'Emma', 'Ready', 'Completed')`;
    await db.sql`insert into user_ingestion_jobs (user_book_id, source_path, status)
      values (${book.id}, 'uploads/moby.epub', 'Completed')`;
    for (
      const [path, q, expect] of [
        ["/auto-publish/jobs", "moby", 1],
        ["/auto-publish/jobs", edition, 1],
        ["/seo/jobs", "MOBY", 1],
        ["/ssg/jobs", "full", 2],
        ["/user-books", "moby", 1],
        ["/enrichment", "moby", 1],
        ["/enrichment", "", 2],
      ] as const
    ) {
      const query = q ? `?q=${encodeURIComponent(q)}&limit=1` : "?limit=1";
      const { status, body } = await call("GET", `${path}${query}`);
      assert.equal(status, 200, path);
      assert.equal(body.jobs.length, 1, `${path}${query}`);
      assert.equal(body.next_cursor !== null, expect > 1, `${path}${query}`);
      if (body.next_cursor) {
        const rest = await call("GET", `${path}${query}&cursor=${body.next_cursor}`);
        assert.equal(rest.body.jobs.length, expect - 1);
        assert.ok(Number(rest.body.jobs[0].id) < Number(body.jobs[0].id));
      }
      assert.equal(typeof body.jobs[0].subject, "string", path);
    }
    // The host queues' lists keep `before`/`next` too.
    const page = await call("GET", "/auto-publish/jobs?status=Failed&limit=1");
    const again = await call(
      "GET",
      `/auto-publish/jobs?status=Failed&limit=1&before=${page.body.next}`,
    );
    assert.equal(again.body.jobs.length, 1);
    assert.notEqual(again.body.jobs[0].id, page.body.jobs[0].id);
  },
);

dbTest(
  "cancel: a Queued job ends Failed (cancelled by admin) and a retry brings it back; a finished job and a Running host-polled job are 409",
  async (db) => {
    const ctx = await ingestionContext(db);
    const { call } = api(db, ctx);
    const id = await insertJob(db, "a.txt");
    const cancelled = await call("POST", `/ingestion/jobs/${id}/cancel`);
    assert.equal(cancelled.status, 200);
    assert.equal(cancelled.body.status, "Failed");
    assert.equal(cancelled.body.error, CANCELLED);
    assert.equal((await call("POST", `/ingestion/jobs/${id}/cancel`)).status, 409);
    const retried = await call("POST", `/ingestion/jobs/${id}/retry`);
    assert.equal(retried.body.status, "Queued");
    assert.equal(retried.body.error, null);
    assert.equal((await call("POST", "/ingestion/jobs/999999/cancel")).status, 404);

    const [edition] = await insertEditions(db, 1);
    const [job] = await db.sql<{ id: string }[]>`
      insert into auto_publish_jobs (edition_id, status, claim_token, claimed_at)
      values (${edition}, 'Running', gen_random_uuid(), now()) returning id`;
    const running = await call("POST", `/auto-publish/jobs/${job.id}/cancel`);
    assert.equal(running.status, 409);
    assert.match(running.body.error, /Running on the host/);
    assert.equal((await call("GET", `/auto-publish/jobs/${job.id}`)).body.status, "Running");
    const [seoJob] = await db.sql<{ id: string }[]>`
      insert into seo_backfill_jobs (edition_id) values (${edition}) returning id`;
    const seoCancel = await call("POST", `/seo/jobs/${seoJob.id}/cancel`);
    assert.equal(seoCancel.status, 200);
    assert.equal(seoCancel.body.error, CANCELLED);
  },
);

dbTest(
  "auto-publish breaker: cancelled jobs do not count toward 5 failures in 24 h; failed ones do",
  async (db) => {
    const ctx = await ingestionContext(db);
    const [edition] = await insertEditions(db, 1);
    for (let i = 0; i < autoPublish.BREAKER_FAILURES; i++) {
      const created = await autoPublishJobs.enqueue(db.sql, edition, 0);
      assert.equal(created.outcome, "created");
      const outcome = await autoPublishJobs.cancel(
        ctx,
        (created as { job: { id: string } }).job.id,
      );
      assert.equal(outcome.outcome, "cancelled");
    }
    const sixth = await autoPublishJobs.enqueue(db.sql, edition, 0);
    assert.equal(sixth.outcome, "created", "5 cancels open no breaker");
    await db.sql`update auto_publish_jobs set status = 'Failed', finished_at = now()
      where id = ${(sixth as { job: { id: string } }).job.id}`;
    await db.sql`insert into auto_publish_jobs (edition_id, status, finished_at)
      select ${edition}, 'Failed', now() from generate_series(1, ${
      autoPublish.BREAKER_FAILURES - 1
    })`;
    assert.equal((await autoPublishJobs.enqueue(db.sql, edition, 0)).outcome, "breaker");
    assert.equal(await autoPublishView.openBreakers!(db.sql), 1);
  },
);

dbTest(
  "bulk retry: a dry run counts, the retry re-queues the matching Failed jobs in one statement, bounded at 10,000",
  async (db) => {
    const ctx = await ingestionContext(db);
    const { call } = api(db, ctx);
    await db.sql`insert into ingestion_jobs (source_path, status, error, finished_at)
      select 'bulk/' || i || '.txt', 'Failed', 'boom', now()
      from generate_series(1, ${BULK_RETRY_MAX + 5}) i`;
    await db.sql`insert into ingestion_jobs (source_path, status, error)
      values ('other/x.txt', 'Failed', 'boom'), ('bulk/done.txt', 'Completed', null)`;
    const dry = await call("POST", "/ingestion/jobs/retry", {
      status: "Failed",
      q: "other",
      dry_run: true,
    });
    assert.deepEqual([dry.body.matched, dry.body.retried, dry.body.dry_run], [1, 0, true]);
    assert.equal(
      (await jobRow(
        db,
        (await db.sql`select id from ingestion_jobs where source_path = 'other/x.txt'`)[0].id,
      )).status,
      "Failed",
    );
    assert.equal((await call("POST", "/ingestion/jobs/retry", { status: "Queued" })).status, 400);

    // One statement: count what the pool sends while the bulk retry runs.
    const statements: string[] = [];
    const counting = connect(db.url, {
      schema: db.schema,
      applicationName: db.applicationName,
      max: 1,
    });
    const spied = { ...ctx, sql: Object.assign(counting, {}) };
    (counting.options as { debug?: unknown }).debug = (_c: number, query: string) =>
      statements.push(query);
    const outcome = await ingestionJobs.bulkRetry(spied, { status: "Failed", q: "bulk/" }, false);
    await counting.end({ timeout: 1 });
    // (The driver's own type lookup on a new connection is not the queue's.)
    const queue = statements.filter((q) => !q.includes("pg_catalog.pg_type"));
    assert.equal(queue.length, 1, queue.join("\n---\n"));
    assert.equal(outcome.matched, BULK_RETRY_MAX + 1, "counted up to the bound + 1");
    assert.equal(outcome.retried, BULK_RETRY_MAX);
    assert.equal(outcome.truncated, true);
    const [{ n }] = await db.sql<{ n: number }[]>`
      select count(*)::int as n from ingestion_jobs where status = 'Queued'`;
    assert.equal(n, BULK_RETRY_MAX);
    const rest = await call("POST", "/ingestion/jobs/retry", { status: "Failed", q: "bulk/" });
    assert.deepEqual([rest.body.matched, rest.body.retried, rest.body.truncated], [5, 5, false]);
    const [left] = await db
      .sql`select status from ingestion_jobs where source_path = 'other/x.txt'`;
    assert.equal(left.status, "Failed", "q kept the other job out");
  },
);

dbTest(
  "bulk retry keeps each queue's rule: one SSG rebuild, one auto-publish job per edition",
  async (db) => {
    const ctx = await ingestionContext(db);
    const { call } = api(db, ctx);
    await db.sql`insert into ssg_rebuild_jobs (status) select 'Failed' from generate_series(1, 3)`;
    const ssg = await call("POST", "/ssg/jobs/retry", { status: "Failed" });
    assert.deepEqual([ssg.body.matched, ssg.body.retried, ssg.body.skipped], [3, 1, 2]);
    const again = await call("POST", "/ssg/jobs/retry", { status: "Failed" });
    assert.equal(again.body.retried, 0, "none while one is Queued");
    const [a, b, c] = await insertEditions(db, 3);
    await db.sql`insert into auto_publish_jobs (edition_id, status) values
      (${a}, 'Failed'), (${a}, 'Failed'), (${b}, 'Failed'), (${c}, 'Failed'), (${c}, 'Queued')`;
    const ap = await call("POST", "/auto-publish/jobs/retry", { status: "Failed" });
    assert.deepEqual([ap.body.matched, ap.body.retried], [4, 2]);
    const [{ n }] = await db.sql<{ n: number }[]>`
      select count(*)::int as n from auto_publish_jobs where status = 'Queued'`;
    assert.equal(n, 3);
    await db.sql`insert into seo_backfill_jobs (edition_id, status) values (${a}, 'Failed')`;
    assert.equal((await seoJobs.bulkRetry(ctx, { status: "Failed" }, false)).retried, 1);
  },
);

dbTest(
  "attempt history: every settle appends its attempt (start, end, outcome, error), kept to the last 20",
  async (db) => {
    const ctx = await ingestionContext(db);
    const { call } = api(db, ctx);
    const id = await insertJob(db, "h.txt");
    const claimAndSettle = async (set: string) => {
      await db
        .sql`update ingestion_jobs set status = 'Processing', attempt_count = attempt_count + 1,
        claimed_at = now(), claimed_by = gen_random_uuid() where id = ${id}`;
      await db.sql.unsafe(`update ingestion_jobs set ${set} where id = ${id}`);
    };
    await claimAndSettle("status = 'Queued', error = 'attempt 1 of 3 failed, will retry: EIO'");
    await claimAndSettle("status = 'Queued', attempt_count = attempt_count - 1, error = null");
    await claimAndSettle("status = 'Failed', error = 'unreadable'");
    await db.sql`update ingestion_jobs set status = 'Queued', attempt_count = 0, error = null
      where id = ${id}`;
    await claimAndSettle("status = 'Completed', error = null");
    const { body } = await call("GET", `/ingestion/jobs/${id}`);
    assert.deepEqual(
      body.attempts.map((a: { attempt: number; outcome: string; error: string | null }) => [
        a.attempt,
        a.outcome,
        a.error,
      ]),
      [
        [1, "retry", "attempt 1 of 3 failed, will retry: EIO"],
        [2, "given_back", null],
        [2, "failed", "unreadable"],
        [1, "completed", null],
      ],
    );
    for (const a of body.attempts) {
      assert.ok(Date.parse(a.started_at) <= Date.parse(a.ended_at), JSON.stringify(a));
    }
    for (let i = 0; i < 25; i++) {
      await claimAndSettle(`status = 'Queued', error = 'try ${i}'`);
    }
    const [row] = await db.sql`select attempts from ingestion_jobs where id = ${id}`;
    assert.equal(row.attempts.length, 20);
    assert.equal(row.attempts[19].error, "try 24");
    assert.equal(row.attempts[0].error, "try 5");
  },
);

/** Two instances' controls: each its own pool and listener on the test schema. */
async function twoControls(db: TestDb, ctx: IngestionContext) {
  const made: { control: QueueControl; close(): Promise<void> }[] = [];
  for (const name of ["a", "b"]) {
    const pool = connect(db.url, {
      schema: db.schema,
      applicationName: `${db.applicationName}-${name}`,
      max: 2,
    });
    const listener = new Listener({
      connect: (hooks) =>
        connect(db.url, {
          schema: db.schema,
          applicationName: `${db.applicationName}-l${name}`,
          max: 1,
          dedicated: true,
          ...hooks,
        }),
      pool,
      log: ctx.log,
      probeChannel: `${db.schema}._probe`,
      probeEveryMs: 60_000,
    });
    const control = new QueueControl({
      sql: pool,
      schema: db.schema,
      log: ctx.log,
      refreshMs: 60_000,
    });
    await listener.listen(control.channel, control.handler);
    await control.start();
    made.push({
      control,
      async close() {
        control.stop();
        await listener.close();
        await pool.end({ timeout: 1 });
      },
    });
  }
  return made;
}

dbTest(
  "cancel of a running job: another instance's request aborts the run through NOTIFY; it is settled Failed (cancelled by admin), fenced, with the attempt recorded",
  async (db) => {
    const running = Promise.withResolvers<void>();
    const ctx: IngestionContext = {
      ...(await ingestionContext(db)),
      // A run that holds until it is aborted, as a long book does.
      extract: (_path, signal) =>
        new Promise((_, reject) => {
          running.resolve();
          signal.addEventListener("abort", () => reject(signal.reason), { once: true });
        }),
    };
    const source = await writeSource(ctx.storageDir, "long.txt", SMALL_BOOK);
    const [owner, other] = await twoControls(db, ctx);
    const consumer = await startConsumer(db, ctx);
    owner.control.onCancel("ingestion", (id) => consumer.consumer.cancel(id));
    try {
      const id = await insertJob(db, source);
      await within("the run to start", running.promise);
      // The API of the other instance answers: its request reaches the owner by NOTIFY.
      const { call } = api(db, ctx, other.control);
      const res = await call("POST", `/ingestion/jobs/${id}/cancel`);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.equal(res.body.status, "Failed");
      assert.equal(res.body.error, CANCELLED);
      const row = await jobRow(db, id);
      assert.equal(row.claimed_by, null);
      assert.deepEqual(row.attempts.map((a) => a.outcome), ["cancelled"]);
      // The consumer goes on: the next job runs.
      running.resolve();
      assert.equal(consumer.consumer.state, "holding");
    } finally {
      await consumer.stop();
      await owner.close();
      await other.close();
    }
  },
);

dbTest(
  "cancelRun is fenced: a run whose claim was lost (another boot's claim now) changes nothing",
  async (db) => {
    const ctx = await ingestionContext(db);
    const id = await insertJob(db, "f.txt");
    const [claimed] = await db.sql<{ attempt_count: number }[]>`
      update ingestion_jobs set status = 'Processing', attempt_count = 1,
        claimed_by = gen_random_uuid(), claimed_at = now() where id = ${id} returning attempt_count`;
    const stale = {
      id,
      source_path: "f.txt",
      edition_id: null,
      attempt_count: claimed.attempt_count,
      claimed_by: ctx.bootId, // this boot's old claim; the row is another's now
      runnable_for_s: null,
    };
    assert.equal(await ingestion.cancelRun(ctx, stale), false);
    const row = await jobRow(db, id);
    assert.equal(row.status, "Processing");
    assert.equal(row.error, null);
    const mine = { ...stale, claimed_by: row.claimed_by! };
    assert.equal(await ingestion.cancelRun(ctx, mine), true);
    assert.equal((await jobRow(db, id)).error, CANCELLED);
  },
);

dbTest(
  "pause: persisted, seen by another instance within a second; a paused consumer keeps its lock and claims nothing; a paused host-polled claim returns nothing; resume claims again",
  async (db) => {
    const ctx = await ingestionContext(db);
    const [a, b] = await twoControls(db, ctx);
    const consumer = await startConsumer(db, ctx, { paused: () => b.control.paused("ingestion") });
    b.control.onPauseChange((queue, paused) => {
      if (queue === "ingestion" && !paused) consumer.wake.notify();
    });
    try {
      const { call } = api(db, ctx, a.control);
      const t0 = performance.now();
      const paused = await call("POST", "/queues/ingestion/pause");
      assert.equal(paused.status, 200);
      assert.equal(paused.body.paused, true);
      await waitFor(
        "the other instance to see the pause",
        () => b.control.paused("ingestion"),
        1000,
      );
      assert.ok(performance.now() - t0 < 1000);
      const source = await writeSource(ctx.storageDir, "p.txt", SMALL_BOOK);
      const id = await insertJob(db, source);
      await sleep(400);
      assert.equal((await jobRow(db, id)).status, "Queued", "a paused consumer claims nothing");
      assert.equal(consumer.consumer.state, "holding", "and keeps its lock");
      // Persisted: a new instance reads it at start.
      const later = testControl(ctx, db.schema);
      await later.refresh();
      assert.equal(later.paused("ingestion"), true);
      // A host-polled queue's claim reads the pause itself.
      const [edition] = await insertEditions(db, 1);
      await autoPublishJobs.enqueue(db.sql, edition, 0);
      await call("POST", "/queues/auto_publish/pause");
      assert.deepEqual((await call("POST", "/auto-publish/jobs/claim")).body, { jobs: [] });
      await call("POST", "/queues/auto-publish/resume"); // the former name works too
      assert.equal((await call("POST", "/auto-publish/jobs/claim")).body.jobs.length, 1);
      const list = await call("GET", "/queues");
      assert.deepEqual(
        list.body.queues.map((q: { name: string; paused: boolean }) => [q.name, q.paused]),
        [["ingestion", true], ["auto_publish", false]],
      );
      await call("POST", "/queues/ingestion/resume");
      await waitFor(
        "the job to complete after resume",
        async () => (await jobRow(db, id)).status === "Completed",
        10_000,
      );
      assert.equal((await call("POST", "/queues/nope/pause")).status, 404);
    } finally {
      await consumer.stop();
      await a.close();
      await b.close();
    }
  },
);

dbTest(
  "a list cursor names an id within bigint: past 9223372036854775807 it is a 400 naming the cursor, never a database error",
  async (db) => {
    const ctx = await ingestionContext(db);
    const { call } = api(db, ctx);
    const id = await insertJob(db, "c.txt");
    for (
      const [last, status] of [
        ["9223372036854775807", 200],
        ["9223372036854775808", 400],
        ["9999999999999999999", 400],
        ["18446744073709551616", 400],
      ] as const
    ) {
      const res = await call("GET", `/ingestion/jobs?cursor=${encodeCursor(last)}`);
      assert.equal(res.status, status, `${last}: ${JSON.stringify(res.body)}`);
      if (status === 200) assert.deepEqual(res.body.jobs.map((j: { id: string }) => j.id), [id]);
      else assert.match(res.body.error, /cursor/);
    }
  },
);

dbTest(
  "cancel of a Processing job no instance runs: 202 after the wait, the job left as it was (a request that finds no run changes nothing)",
  async (db) => {
    const ctx = await ingestionContext(db);
    const { call } = api(db, ctx);
    const id = await insertJob(db, "orphan.txt");
    const [claimed] = await db.sql<{ claimed_by: string }[]>`
      update ingestion_jobs set status = 'Processing', attempt_count = 1,
        claimed_by = gen_random_uuid(), claimed_at = now() where id = ${id} returning claimed_by`;
    const t0 = performance.now();
    const res = await call("POST", `/ingestion/jobs/${id}/cancel`);
    assert.equal(res.status, 202, JSON.stringify(res.body));
    assert.ok(performance.now() - t0 >= CANCEL_WAIT_MS - 50, "answered after the wait");
    assert.equal(res.body.status, "Processing");
    assert.match(res.body.cancel, /requested/);
    const row = await jobRow(db, id);
    assert.deepEqual([row.status, row.claimed_by, row.error], [
      "Processing",
      claimed.claimed_by,
      null,
    ]);
  },
);

dbTest(
  "pause: pausing a paused queue keeps its first paused_at; a resume and a new pause take a new one",
  async (db) => {
    const ctx = await ingestionContext(db);
    const { call } = api(db, ctx);
    const first = await call("POST", "/queues/ingestion/pause");
    assert.equal(first.status, 200);
    await sleep(20);
    const again = await call("POST", "/queues/ingestion/pause");
    assert.equal(again.body.paused, true);
    assert.equal(again.body.paused_at, first.body.paused_at);
    const [row] = await db.sql<{ paused_at: Date }[]>`
      select paused_at from queue_pauses where queue = 'ingestion'`;
    assert.equal(row.paused_at.toISOString(), first.body.paused_at);
    const resumed = await call("POST", "/queues/ingestion/resume");
    assert.deepEqual([resumed.body.paused, resumed.body.paused_at], [false, null]);
    await sleep(20);
    const later = await call("POST", "/queues/ingestion/pause");
    assert.ok(Date.parse(later.body.paused_at) > Date.parse(first.body.paused_at));
  },
);

dbTest(
  "pause: a pause whose notification an instance missed (its listen connection was down) is read on its re-listen, long before the periodic re-read",
  async (db) => {
    const ctx = await ingestionContext(db);
    const [a, b] = await twoControls(db, ctx);
    try {
      // The pause lands with no notification, as one sent while b's listener was away is lost.
      await db.sql.begin(async (tx) => {
        await tx`set local session_replication_role = replica`;
        await tx`insert into queue_pauses (queue) values ('ingestion')`;
      });
      await sleep(200);
      assert.equal(b.control.paused("ingestion"), false, "no notification was sent");
      const [{ n }] = await db.sql<{ n: number }[]>`
        select count(pg_terminate_backend(pid))::int as n from pg_stat_activity
        where application_name = ${`${db.applicationName}-lb`}`;
      assert.equal(n, 1, "b's listen connection");
      // refreshMs is 60 s: only the re-listen's re-read can see it this soon.
      await waitFor(
        "b to re-read the pauses on its re-listen",
        () => b.control.paused("ingestion"),
        5000,
      );
      assert.equal(a.control.paused("ingestion"), false, "a kept its listener and read nothing");
    } finally {
      await a.close();
      await b.close();
    }
  },
);

dbTest(
  "pause: a failed re-read of the pauses keeps the last one read (a database error resumes nothing)",
  async (db) => {
    const ctx = await ingestionContext(db);
    const [a, b] = await twoControls(db, ctx);
    try {
      await a.control.pause("ingestion");
      await waitFor("b to see the pause", () => b.control.paused("ingestion"), 1000);
      await db.sql`alter table queue_pauses rename to queue_pauses_away`;
      try {
        await b.control.refresh();
        assert.equal(b.control.paused("ingestion"), true);
        assert.equal(b.control.state("ingestion").paused, true);
      } finally {
        await db.sql`alter table queue_pauses_away rename to queue_pauses`;
      }
      await b.control.refresh();
      assert.equal(b.control.paused("ingestion"), true);
    } finally {
      await a.close();
      await b.close();
    }
  },
);

/** Each queue's table as its attempt trigger names it (sql/012_operations.sql). */
const ATTEMPT_TABLES = [
  [
    "ingestion_jobs",
    "status",
    "attempt_count",
    "claimed_at",
    "error",
    "attempts",
    "Queued",
    "Processing",
  ],
  [
    "user_ingestion_jobs",
    "status",
    "attempt_count",
    "claimed_at",
    "error",
    "attempts",
    "Queued",
    "Processing",
  ],
  [
    "ssg_rebuild_jobs",
    "status",
    "attempt_count",
    "started_at",
    "error",
    "attempts",
    "Queued",
    "Running",
  ],
  [
    "user_books",
    "metadata_enrichment_status",
    "metadata_enrichment_attempt_count",
    "metadata_enrichment_started_at",
    "metadata_enrichment_error",
    "metadata_enrichment_attempts",
    "Pending",
    "Running",
  ],
  [
    "auto_publish_jobs",
    "status",
    "attempt_count",
    "claimed_at",
    "error",
    "attempts",
    "Queued",
    "Running",
  ],
  [
    "seo_backfill_jobs",
    "status",
    "attempt_count",
    "claimed_at",
    "error",
    "attempts",
    "Queued",
    "Running",
  ],
] as const;

dbTest(
  "attempt history on every queue's table: each write out of the running status appends one attempt with its outcome; a claim or a write while running appends none",
  async (db) => {
    const [edition] = await insertEditions(db, 1);
    const [book] = await db.sql<{ id: string }[]>`
      insert into user_books (owner_id, title, status) values (7, 'T', 'Ready') returning id`;
    for (
      const [table, status, attempt, started, error, attempts, runnable, running] of ATTEMPT_TABLES
    ) {
      const t = (s: string) => db.sql.unsafe(s.replaceAll("$T", table));
      const inserted = table === "user_books"
        ? await t(`update $T set ${status} = '${runnable}' where id = ${book.id} returning id`)
        : table === "ingestion_jobs"
        ? await t(`insert into $T (source_path) values ('a.txt') returning id`)
        : table === "user_ingestion_jobs"
        ? await t(
          `insert into $T (user_book_id, source_path) values (${book.id}, 'u.txt') returning id`,
        )
        : table === "ssg_rebuild_jobs"
        ? await t(`insert into $T default values returning id`)
        : await t(`insert into $T (edition_id) values (${edition}) returning id`);
      const id = inserted[0].id;
      const claim = () =>
        t(`update $T set ${status} = '${running}', ${attempt} = ${attempt} + 1,
           ${started} = clock_timestamp() where id = ${id}`);
      const settle = (set: string) => t(`update $T set ${set} where id = ${id}`);
      await claim();
      await settle(`${error} = 'still running'`); // not out of the running status
      await settle(`${status} = '${runnable}', ${error} = 'transient'`);
      await claim();
      await settle(`${status} = '${runnable}', ${attempt} = ${attempt} - 1, ${error} = null`);
      await claim();
      await settle(`${status} = 'Failed', ${error} = 'bad input'`);
      await settle(`${status} = '${runnable}', ${attempt} = 0, ${error} = null`); // the retry
      await claim();
      await settle(`${status} = 'Failed', ${error} = '${CANCELLED}'`);
      await settle(`${status} = '${runnable}', ${attempt} = 0, ${error} = null`);
      await claim();
      await settle(`${status} = 'Completed'`);
      const [row] = await t(`select ${attempts} as attempts from $T where id = ${id}`);
      const list = row.attempts as {
        attempt: number;
        outcome: string;
        error: string | null;
        started_at: string;
        ended_at: string;
      }[];
      assert.deepEqual(list.map((a) => [a.attempt, a.outcome, a.error]), [
        [1, "retry", "transient"],
        [2, "given_back", null],
        [2, "failed", "bad input"],
        [1, "cancelled", CANCELLED],
        [1, "completed", null],
      ], table);
      for (const a of list) {
        assert.ok(a.started_at && Date.parse(a.started_at) <= Date.parse(a.ended_at), table);
      }
    }
  },
);

dbTest(
  "every queue's bulk retry refuses a body not declared JSON (415 with a JSON body) and retries nothing",
  async (db) => {
    const ctx = await ingestionContext(db);
    const { app, call } = api(db, ctx);
    await db.sql`insert into ingestion_jobs (source_path, status, error)
      values ('plain/failed.txt', 'Failed', 'unreadable')`;
    const retries = [
      "/ingestion/jobs/retry",
      "/auto-publish/jobs/retry",
      "/seo/jobs/retry",
      "/ssg/jobs/retry",
      "/user-books/retry",
      "/enrichment/retry",
    ];
    for (const path of retries) {
      for (const type of ["text/plain", "application/x-www-form-urlencoded", undefined]) {
        const res = await app.request(`/internal${path}`, {
          method: "POST",
          headers: type === undefined ? auth : { ...auth, "content-type": type },
          body: '{"status": "Failed"}',
        });
        assert.equal(res.status, 415, `${path} as ${type}`);
        assert.deepEqual(await res.json(), { error: "Expected Content-Type: application/json" });
      }
      const dry = await call("POST", path, { status: "Failed", dry_run: true });
      assert.equal(dry.status, 200, `${path}: ${JSON.stringify(dry.body)}`);
    }
    const [job] = await db.sql`SELECT status FROM ingestion_jobs`;
    assert.equal(job.status, "Failed");
  },
);

dbTest(
  "every queue's list and bulk retry refuse a search text PostgreSQL cannot take (a NUL) or too long with a 400 naming q, never a database error",
  async (db) => {
    const ctx = await ingestionContext(db);
    const { call } = api(db, ctx);
    const lists = [
      "/ingestion/jobs",
      "/auto-publish/jobs",
      "/seo/jobs",
      "/ssg/jobs",
      "/user-books",
      "/enrichment",
    ];
    const retries = [
      "/ingestion/jobs/retry",
      "/auto-publish/jobs/retry",
      "/seo/jobs/retry",
      "/ssg/jobs/retry",
      "/enrichment/retry",
    ];
    for (const q of ["moby\0dick", "\0", "x".repeat(201)]) {
      for (const path of lists) {
        const res = await call("GET", `${path}?q=${encodeURIComponent(q)}`);
        assert.equal(
          res.status,
          400,
          `${path} ${JSON.stringify(q.slice(0, 12))}: ${JSON.stringify(res.body)}`,
        );
        assert.match(res.body.error, /\bq\b|NUL|200/, path);
      }
      for (const path of retries) {
        const res = await call("POST", path, { status: "Failed", q, dry_run: true });
        assert.equal(res.status, 400, `${path}: ${JSON.stringify(res.body)}`);
      }
    }
    const fine = await call("GET", `/ingestion/jobs?q=${encodeURIComponent("x".repeat(200))}`);
    assert.equal(fine.status, 200);
  },
);

dbTest(
  "pause: every host-polled queue's claim, keyed or not, returns nothing while it is paused and claims again on resume",
  async (db) => {
    const ctx = await ingestionContext(db);
    const { call, control } = api(db, ctx);
    for (
      const [queue, enqueue, claimPath] of [
        ["auto_publish", "/auto-publish/jobs", "/auto-publish/jobs/claim"],
        ["seo_backfill", "/seo/jobs", "/seo/jobs/claim"],
      ] as const
    ) {
      const [edition] = await insertEditions(db, 1);
      assert.equal((await call("POST", enqueue, { edition_id: edition })).status, 201, queue);
      assert.equal((await control.pause(queue)).paused, true);
      for (const body of [{}, { claim_key: crypto.randomUUID() }]) {
        const claimed = await call("POST", claimPath, body);
        assert.equal(claimed.status, 200, queue);
        assert.deepEqual(claimed.body.jobs, [], `${queue} paused, ${JSON.stringify(body)}`);
      }
      await control.resume(queue);
      const claimed = await call("POST", claimPath, { claim_key: crypto.randomUUID() });
      assert.equal(claimed.body.jobs.length, 1, `${queue} resumed`);
    }
  },
);
