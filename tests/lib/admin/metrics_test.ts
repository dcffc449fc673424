import assert from "node:assert/strict";
import * as ingestion from "../../../queues/ingestion/mod.ts";
import * as ingestionJobs from "../../../queues/ingestion/jobs.ts";
import * as ssg from "../../../queues/ssg/mod.ts";
import * as userIngestion from "../../../queues/user_ingestion/mod.ts";
import * as enrichment from "../../../queues/enrichment/mod.ts";
import * as autoPublish from "../../../queues/auto_publish/mod.ts";
import * as seo from "../../../queues/seo_backfill/mod.ts";
import { createMetrics, metricsRoutes } from "../../../lib/admin/metrics.ts";
import { StatsCache } from "../../../lib/admin/stats_cache.ts";
import { ingestionView } from "../../../queues/ingestion/view.ts";
import { userIngestionView } from "../../../queues/user_ingestion/view.ts";
import { enrichmentView } from "../../../queues/enrichment/view.ts";
import { ssgView } from "../../../queues/ssg/view.ts";
import { autoPublishView } from "../../../queues/auto_publish/view.ts";
import { seoView } from "../../../queues/seo_backfill/view.ts";
import { Listener } from "../../../lib/listener.ts";
import { Wake } from "../../../lib/wake.ts";
import { connect } from "../../../lib/db.ts";
import { startProxy } from "../../_proxy.ts";
import { spawnWorker, TEST_TOKEN } from "../../_worker.ts";
import type { EventHub } from "../../../lib/events.ts";
import { dbTest, type TestDb, waitFor, within } from "../../_db.ts";
import {
  ingestionContext,
  jobRow,
  SMALL_BOOK,
  startConsumer,
  writeSource,
} from "../../_ingestion.ts";
import { parseScrape, valueOf } from "../../_prometheus.ts";

const TOKEN = "metrics-test-token-0123456789";

async function setup(db: TestDb) {
  const ctx = await ingestionContext(db);
  const cache = new StatsCache({
    sql: db.sql,
    schema: db.schema,
    views: [ingestionView],
    log: ctx.log,
  });
  const running = await startConsumer(db, ctx);
  const metrics = createMetrics({
    views: [ingestionView],
    cache,
    events: ctx.events,
    lockHeld: (queue) => queue === "ingestion" && running.lock.held,
    channelDrops: () => ({ events: ctx.events.droppedTotal }),
    poolMax: { pool: 4 },
  });
  const app = metricsRoutes(metrics.registry, TOKEN);
  const scrape = async () => {
    const res = await app.request("/metrics", { headers: { authorization: `Bearer ${TOKEN}` } });
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type") ?? "", /^text\/plain; version=0\.0\.4/);
    return parseScrape(await res.text());
  };
  return { ctx, cache, running, metrics, scrape };
}

const q = { queue: "ingestion" };

/**
 * Resolves when `hub` publishes `transition` for job `id`. The counters are fed by the job events,
 * which are published after the settling transaction commits: the row shows its new status a
 * moment before its event, so a test that polled the row and scraped at once could miss it (the
 * gap grows with load). Register before the job can settle.
 */
function published(hub: EventHub, id: () => string | undefined, transition: string) {
  let stop = () => {};
  const seen = new Promise<void>((resolve) => {
    stop = hub.observe((e) => {
      if (e.queue === "ingestion" && e.id === id() && e.transition === transition) resolve();
    });
  });
  return within(`the ${transition} event`, seen.finally(stop), 120_000);
}

dbTest(
  "GET /metrics refuses a missing, wrong or non-Bearer token with 401 and a Bearer challenge",
  async (db) => {
    const { running, metrics } = await setup(db);
    try {
      const app = metricsRoutes(metrics.registry, TOKEN);
      const cases: Array<[string | undefined, string]> = [
        [undefined, 'Bearer realm="textstack-metrics"'],
        ["Basic dXNlcjpwYXNz", 'Bearer realm="textstack-metrics"'],
        ["Bearer a b", 'Bearer realm="textstack-metrics", error="invalid_token"'],
        ["Bearer nope", 'Bearer realm="textstack-metrics", error="invalid_token"'],
      ];
      for (const [authorization, challenge] of cases) {
        const res = await app.request("/metrics", {
          headers: authorization ? { authorization } : {},
        });
        assert.equal(res.status, 401, String(authorization));
        assert.equal(res.headers.get("www-authenticate"), challenge, String(authorization));
        assert.match(res.headers.get("content-type") ?? "", /application\/json/);
        const body = await res.text();
        assert.equal(typeof JSON.parse(body).error, "string");
        assert.doesNotMatch(body, /textstack_worker_/);
      }
    } finally {
      metrics.stop();
      await running.stop();
    }
  },
);

dbTest("/metrics: every series exists at startup, and the values move as jobs run", async (db) => {
  const { ctx, cache, running, metrics, scrape } = await setup(db);
  try {
    await waitFor("the consumer to hold its lock", () => running.lock.held);
    let m = await scrape();
    for (const name of ["claims", "completions", "failures", "give_backs", "recoveries"]) {
      assert.equal(valueOf(m, `textstack_worker_${name}_total`, q), 0, name);
    }
    assert.equal(valueOf(m, "textstack_worker_run_duration_seconds_count", q), 0);
    assert.equal(valueOf(m, "textstack_worker_wake_latency_seconds_count", q), 0);
    assert.equal(valueOf(m, "textstack_worker_jobs", { ...q, status: "Queued" }), 0);
    assert.equal(valueOf(m, "textstack_worker_lock_held", q), 1);
    assert.equal(valueOf(m, "textstack_worker_channel_dropped_total", { channel: "events" }), 0);
    assert.equal(valueOf(m, "textstack_worker_event_stream_subscribers"), 0);

    // A book that completes, and a file the reader refuses (a NUL byte): Failed at once.
    await writeSource(ctx.storageDir, "good.txt", SMALL_BOOK);
    await writeSource(ctx.storageDir, "bad.txt", "CHAPTER I\n\nbroken\u0000text\n");
    // Ids are known only once enqueued; the waits start before, so no event can slip past.
    const ids: { good?: string; bad?: string } = {};
    const goodDone = published(ctx.events, () => ids.good, "completed");
    const good = await ingestionJobs.enqueue(ctx, "good.txt", null);
    ids.good = good.id;
    await goodDone;
    assert.equal((await jobRow(db, good.id)).status, "Completed");
    const badDone = published(ctx.events, () => ids.bad, "failed");
    const bad = await ingestionJobs.enqueue(ctx, "bad.txt", null);
    ids.bad = bad.id;
    await badDone;
    assert.equal((await jobRow(db, bad.id)).status, "Failed");

    // The gauges move only with the background count, not per scrape.
    m = await scrape();
    assert.equal(valueOf(m, "textstack_worker_jobs", { ...q, status: "Completed" }), 0);
    await cache.refresh();
    m = await scrape();
    assert.equal(valueOf(m, "textstack_worker_jobs", { ...q, status: "Completed" }), 1);
    assert.equal(valueOf(m, "textstack_worker_jobs", { ...q, status: "Failed" }), 1);
    assert.equal(valueOf(m, "textstack_worker_oldest_runnable_age_seconds", q), 0);
    assert.equal(valueOf(m, "textstack_worker_claims_total", q), 2);
    assert.equal(valueOf(m, "textstack_worker_completions_total", q), 1);
    assert.equal(valueOf(m, "textstack_worker_failures_total", q), 1);
    assert.equal(valueOf(m, "textstack_worker_run_duration_seconds_count", q), 2);
    assert.equal(valueOf(m, "textstack_worker_wake_latency_seconds_count", q), 2);
    const latency = valueOf(m, "textstack_worker_wake_latency_seconds_sum", q);
    assert.ok(latency >= 0 && latency < 5, `wake latency sum ${latency} s`);
    assert.equal(m.types.get("textstack_worker_wake_latency_seconds"), "HISTOGRAM");
    assert.equal(m.types.get("textstack_worker_claims_total"), "COUNTER");
    assert.equal(m.types.get("textstack_worker_jobs"), "GAUGE");

    // A queued job nobody can claim yet (the consumer is stopped) ages in the count.
    await running.stop();
    m = await scrape();
    assert.equal(valueOf(m, "textstack_worker_lock_held", q), 0);
    await writeSource(ctx.storageDir, "later.txt", SMALL_BOOK);
    await ingestionJobs.enqueue(ctx, "later.txt", null);
    await db.sql`update ingestion_jobs set run_after = now() - interval '90 seconds',
      updated_at = now() - interval '90 seconds' where source_path = 'later.txt'`;
    assert.ok(await ingestionJobs.retry(ctx, bad.id));
    await cache.refresh();
    m = await scrape();
    assert.equal(valueOf(m, "textstack_worker_jobs", { ...q, status: "Queued" }), 2);
    assert.ok(valueOf(m, "textstack_worker_oldest_runnable_age_seconds", q) >= 90);
    assert.equal(valueOf(m, "textstack_worker_retries_total", q), 1);

    // Drops of an event-stream subscriber that fell behind are counted, also after it closed.
    const sub = ctx.events.subscribe(1);
    assert.equal(valueOf(await scrape(), "textstack_worker_event_stream_subscribers"), 1);
    for (let i = 0; i < 3; i++) {
      ctx.events.publish({
        queue: "other",
        id: String(i),
        transition: "retried",
        status: "Queued",
        attempt: 0,
      });
    }
    sub.close();
    m = await scrape();
    assert.equal(valueOf(m, "textstack_worker_channel_dropped_total", { channel: "events" }), 2);
    assert.equal(valueOf(m, "textstack_worker_event_stream_subscribers"), 0);
  } finally {
    metrics.stop();
    await running.stop();
  }
});

dbTest(
  "wake latency: a claim reports how long its job was runnable, by the database clock",
  async (db) => {
    const ctx = await ingestionContext(db);
    const [{ id }] = await db.sql<{ id: string }[]>`
    insert into ingestion_jobs (source_path, run_after, updated_at)
    values ('x.txt', now() - interval '30 seconds', now() - interval '40 seconds') returning id`;
    const job = await ingestion.claim(ctx);
    assert.equal(job?.id, id);
    assert.ok(job!.runnable_for_s! >= 30 && job!.runnable_for_s! < 31, `${job!.runnable_for_s}`);
    // A stale re-pick is not a wake: no latency.
    await db.sql`update ingestion_jobs set claimed_at = now() - interval '1 hour' where id = ${id}`;
    const again = await ingestion.claim(ctx);
    assert.equal(again?.id, id);
    assert.equal(again!.runnable_for_s, null);
  },
);

dbTest(
  "/metrics: every queue's series from startup, listener reconnects and missed probes, open breakers",
  async (db) => {
    const ctx = await ingestionContext(db);
    const views = [
      ingestionView,
      userIngestionView,
      enrichmentView,
      ssgView,
      autoPublishView,
      seoView,
    ];
    const cache = new StatsCache({ sql: db.sql, schema: db.schema, views, log: ctx.log });
    const proxy = startProxy(db.url);
    const app = `${db.schema}-listener`;
    const listener = new Listener({
      connect: (hooks) =>
        connect(proxy.url, {
          schema: db.schema,
          applicationName: app,
          max: 1,
          dedicated: true,
          ...hooks,
        }),
      pool: db.sql,
      log: ctx.log,
      probeChannel: `${db.schema}._probe`,
      probeEveryMs: 60_000,
      probeTimeoutMs: 500,
    });
    const metrics = createMetrics({
      views,
      cache,
      events: ctx.events,
      lockHeld: () => false,
      channelDrops: () => ({ events: ctx.events.droppedTotal }),
      poolMax: { pool: 4 },
      listener,
    });
    const scrape = async () => parseScrape(await metrics.registry.metrics());
    try {
      await listener.listen(`${db.schema}.ingestion_jobs`, new Wake("ingestion"));
      assert.equal(await listener.start(), true);
      let m = await scrape();
      for (const view of views) {
        for (const status of view.statuses) {
          assert.equal(valueOf(m, "textstack_worker_jobs", { queue: view.name, status }), 0);
        }
        assert.equal(valueOf(m, "textstack_worker_claims_total", { queue: view.name }), 0);
        const lock = () => valueOf(m, "textstack_worker_lock_held", { queue: view.name });
        // A host-polled queue has no lock in this process: no series, rather than a false 0.
        if (view.consumer === "worker") assert.equal(lock(), 0);
        else assert.throws(lock, /No sample/);
      }
      assert.deepEqual(
        views.map((v) => v.name).sort(),
        ["auto_publish", "enrichment", "ingestion", "seo_backfill", "ssg", "user_ingestion"],
      );
      assert.equal(valueOf(m, "textstack_worker_breakers_open", { queue: "auto_publish" }), 0);
      assert.equal(valueOf(m, "textstack_worker_listener_reconnects_total"), 0);
      assert.equal(valueOf(m, "textstack_worker_listener_probe_failures_total"), 0);

      // A deaf listener: the probe misses, the client is replaced.
      proxy.dropNotifications(/-listener$/);
      assert.equal(await listener.probe(), false);
      proxy.dropNotifications(null);
      assert.equal(await listener.probe(), true);
      m = await scrape();
      assert.equal(valueOf(m, "textstack_worker_listener_probe_failures_total"), 1);
      assert.equal(valueOf(m, "textstack_worker_listener_reconnects_total"), 1);
      // A dropped socket: postgres.js reconnects and re-listens by itself.
      const ended = await db.sql`
        select pg_terminate_backend(pid) from pg_stat_activity where application_name = ${app}`;
      assert.equal(ended.length, 1);
      await waitFor("the listener to reconnect", () => listener.reconnects === 2, 30_000);
      m = await scrape();
      assert.equal(valueOf(m, "textstack_worker_listener_reconnects_total"), 2);
      assert.equal(await listener.probe(), true, "it delivers again after the reconnect");

      // Auto-publish's breaker: an edition with 5 Failed jobs in 24 h, counted in the background.
      const [{ id: edition }] = await db.sql<{ id: string }[]>`
        insert into editions (title, format) values ('Breaker', 'txt') returning id`;
      await db.sql`
        insert into auto_publish_jobs (edition_id, status, finished_at)
        select ${edition}, 'Failed', now() from generate_series(1, 5)`;
      m = await scrape();
      assert.equal(valueOf(m, "textstack_worker_breakers_open", { queue: "auto_publish" }), 0);
      await cache.refresh();
      m = await scrape();
      assert.equal(valueOf(m, "textstack_worker_breakers_open", { queue: "auto_publish" }), 1);
      assert.equal(
        valueOf(m, "textstack_worker_jobs", { queue: "auto_publish", status: "Failed" }),
        5,
      );
    } finally {
      metrics.stop();
      await listener.close();
      await proxy.close();
    }
  },
);

dbTest(
  "main.ts: /metrics covers all six queues (the four it consumes hold their lock), METRICS_TOKEN guards it, and /internal/openapi.json every route group",
  async (db) => {
    const storage = await Deno.makeTempDir({ prefix: "textstack-metrics-" });
    const metricsToken = "metrics-only-token-0123456789";
    const worker = spawnWorker(db, { STORAGE_DIR: storage, METRICS_TOKEN: metricsToken });
    try {
      const base = await worker.baseUrl();
      const get = (path: string, token: string) =>
        fetch(`${base}${path}`, { headers: { authorization: `Bearer ${token}` } });
      // The internal token does not open /metrics once METRICS_TOKEN is set.
      const refused = await get("/metrics", TEST_TOKEN);
      assert.equal(refused.status, 401);
      await refused.body?.cancel();
      let m = parseScrape("");
      await waitFor("every consumer to hold its lock", async () => {
        const res = await get("/metrics", metricsToken);
        assert.equal(res.status, 200);
        m = parseScrape(await res.text());
        return ["ingestion", "user_ingestion", "enrichment", "ssg"].every((queue) =>
          valueOf(m, "textstack_worker_lock_held", { queue }) === 1
        );
      }, 30_000);
      const queues = new Set(
        m.samples.get("textstack_worker_jobs")!.map((s) => s.labels.queue),
      );
      assert.deepEqual(
        [...queues].sort(),
        ["auto_publish", "enrichment", "ingestion", "seo_backfill", "ssg", "user_ingestion"],
      );
      for (const queue of ["auto_publish", "seo_backfill"]) {
        assert.throws(() => valueOf(m, "textstack_worker_lock_held", { queue }), /No sample/);
      }
      assert.equal(valueOf(m, "textstack_worker_breakers_open", { queue: "auto_publish" }), 0);
      assert.equal(valueOf(m, "textstack_worker_listener_reconnects_total"), 0);
      assert.equal(valueOf(m, "textstack_worker_db_pool_max", { pool: "pool" }), 10);

      const doc = await (await get("/internal/openapi.json", TEST_TOKEN)).json();
      const groups = new Set(Object.keys(doc.paths).map((p) => p.split("/")[2]));
      assert.deepEqual([...groups].sort(), [
        "auto-publish",
        "editions",
        "enrichment",
        "events",
        "ingestion",
        "openapi.json",
        "queues",
        "seo",
        "ssg",
        "user-books",
      ]);
      // The queue pause gauge, every queue at 0 while none is paused.
      for (const queue of ["ingestion", "ssg", "auto_publish"]) {
        assert.equal(valueOf(m, "textstack_worker_queue_paused", { queue }), 0);
      }
    } finally {
      worker.child.kill("SIGTERM");
      await worker.exited;
      await Deno.remove(storage, { recursive: true });
    }
  },
);

dbTest(
  "wake latency: every queue's claim reports how long its job was runnable, by the database clock",
  async (db) => {
    const ctx = await ingestionContext(db);
    const claimed = new Map<string, number | null | undefined>();
    ctx.events.observe((e) => {
      if (e.transition === "claimed") claimed.set(e.queue, e.runnableForS);
    });
    const ago = db.sql`now() - interval '20 seconds'`;
    const [{ id: edition }] = await db.sql<{ id: string }[]>`
      insert into editions (title, format) values ('Wake', 'txt') returning id`;
    await db.sql`insert into ssg_rebuild_jobs (kind, updated_at) values ('Full', ${ago})`;
    const [{ id: book }] = await db.sql<{ id: string }[]>`
      insert into user_books (owner_id) values (7) returning id`;
    await db.sql`
      insert into user_ingestion_jobs (user_book_id, source_path, run_after, updated_at)
      values (${book}, 'u.txt', ${ago}, ${ago})`;
    await db.sql`
      insert into user_books (owner_id, status, metadata_enrichment_status, updated_at)
      values (8, 'Ready', 'Pending', ${ago})`;
    await db
      .sql`insert into auto_publish_jobs (edition_id, updated_at) values (${edition}, ${ago})`;
    await db
      .sql`insert into seo_backfill_jobs (edition_id, updated_at) values (${edition}, ${ago})`;

    assert.ok(await ssg.claim({ ...ctx, siteDir: "", siteUrl: "" }));
    assert.ok(await userIngestion.claim({ ...ctx, staleAfterMs: 120_000 }));
    assert.ok(await enrichment.claim({ ...ctx, staleAfterMs: 600_000, remote: null }));
    const published = await autoPublish.claim(ctx);
    assert.ok(published);
    assert.equal("runnable_for_s" in published, false, "the poller's job keeps its shape");
    const [seoJob] = await seo.claim({ ...ctx, staleAfterMs: 3_600_000 }, 5);
    assert.equal("runnable_for_s" in seoJob, false, "the poller's job keeps its shape");
    assert.deepEqual([...claimed.keys()].sort(), [
      "auto_publish",
      "enrichment",
      "seo_backfill",
      "ssg",
      "user_ingestion",
    ]);
    for (const [queue, seconds] of claimed) {
      assert.ok(
        typeof seconds === "number" && seconds >= 20 && seconds < 25,
        `${queue}: ${seconds}`,
      );
    }
    // A stale re-pick is not a wake: no latency for it.
    await db.sql`update user_ingestion_jobs set claimed_at = now() - interval '1 hour'`;
    claimed.clear();
    assert.ok(await userIngestion.claim({ ...ctx, staleAfterMs: 120_000 }));
    assert.equal(claimed.get("user_ingestion"), null);
    // The crew path inserts its job already Running: no wake was for it.
    claimed.clear();
    assert.ok(await seo.crew(ctx, edition));
    assert.equal(claimed.get("seo_backfill"), null);
  },
);
