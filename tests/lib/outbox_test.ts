/**
 * The outbox (lib/outbox.ts) on real Postgres with a real IndexNow endpoint (Deno.serve on
 * 127.0.0.1:0): auto-publish's complete records its ping in its own transaction, so a lost COMMIT
 * answer (tests/_proxy.ts drops every reply from the COMMIT on), a crash right after the commit
 * or a retried complete never skips the ping and never pings twice; one drain delivers (its own
 * advisory lock; a second stands by and takes over); a failing endpoint is tried again.
 *
 * @module
 */
import assert from "node:assert/strict";
import { connect } from "../../lib/db.ts";
import { createLogger } from "../../lib/log.ts";
import { QueueLock } from "../../lib/lock.ts";
import { Wake } from "../../lib/wake.ts";
import { listenForWakes } from "../../lib/listener.ts";
import { OutboxDrain } from "../../lib/outbox.ts";
import { EventHub } from "../../lib/events.ts";
import { Lifecycle } from "../../lib/lifecycle.ts";
import { createApi } from "../../lib/http/api.ts";
import { editionUrl, OUTBOX_KIND, ping, recordPing } from "../../queues/auto_publish/_indexnow.ts";
import { autoPublishRoutes } from "../../queues/auto_publish/routes.ts";
import { dbTest, type TestDb, waitFor } from "../_db.ts";
import { HOST_TOKEN, insertEdition } from "../_host.ts";
import { startProxy } from "../_proxy.ts";

const log = createLogger(Deno.env.get("TEST_LOG_LEVEL") ?? "silent");
const SITE = "https://books.example";

/** A real IndexNow endpoint counting the URLs it was sent; `failing` answers 500. */
export function startIndexNow() {
  const urls: string[] = [];
  const state = { failing: false };
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    const body = await req.json();
    if (state.failing) return new Response("down", { status: 500 });
    urls.push(...body.urlList);
    return new Response(null, { status: 202 });
  });
  const settings = {
    url: `http://127.0.0.1:${(server.addr as Deno.NetAddr).port}/indexnow`,
    key: "test-key-0123",
    siteUrl: SITE,
  };
  return { urls, state, settings, close: () => server.shutdown() };
}

/** An outbox drain of this schema delivering IndexNow pings, as main.ts builds it. */
export async function startDrain(
  db: TestDb,
  settings: ReturnType<typeof startIndexNow>["settings"],
) {
  const wake = new Wake("outbox");
  const listener = connect(db.url, { schema: db.schema, applicationName: "t-outbox-l", max: 1 });
  await listenForWakes(listener, `${db.schema}.outbox`, wake, log);
  const lock = new QueueLock({ url: db.url, schema: db.schema, queue: "outbox", log });
  const drain = new OutboxDrain({
    sql: db.sql,
    log,
    lock,
    wake,
    pollIntervalMs: 200,
    standbyRetryMs: 100,
    handlers: {
      [OUTBOX_KIND]: (payload, signal) =>
        ping(settings, [editionUrl(settings.siteUrl, String(payload.edition_id))], signal),
    },
  });
  drain.start();
  return {
    drain,
    lock,
    stop: async () => {
      await drain.stop(2000);
      await listener.end({ timeout: 1 });
    },
  };
}

function api(sql: TestDb["sql"]) {
  const app = createApi({
    token: HOST_TOKEN,
    log,
    events: new EventHub(),
    lifecycle: new Lifecycle(log, 2000),
    health: () => Promise.resolve({}),
    routes: {
      "/auto-publish": autoPublishRoutes({ sql, log, events: new EventHub(), indexNow: true }),
    },
  });
  return (path: string, body?: unknown) =>
    app.request(`/internal/auto-publish${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${HOST_TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify(body ?? {}),
    });
}

const rows = async (db: TestDb) =>
  await db.sql<{ dedup_key: string; delivered_at: Date | null; attempt_count: number }[]>`
    select dedup_key, delivered_at, attempt_count from outbox order by id`;

dbTest(
  "a lost COMMIT answer on complete: the retry gets 200, the edition is published once and pinged exactly once",
  async (db) => {
    const indexNow = startIndexNow();
    const proxy = startProxy(db.url);
    const pool = connect(proxy.url, { schema: db.schema, applicationName: "t-pool", max: 1 });
    const call = api(pool);
    const running = await startDrain(db, indexNow.settings);
    try {
      const edition = await insertEdition(db.sql);
      assert.equal((await call("/jobs", { edition_id: edition })).status, 201);
      const job = (await (await call("/jobs/claim")).json()).jobs[0];
      proxy.muteAfterCommit(/^t-pool$/);
      const answer = call(`/jobs/${job.id}/complete`, { claim_token: job.claim_token });
      await waitFor(
        "the complete to commit",
        async () =>
          (await db.sql`select status from auto_publish_jobs where id = ${job.id}`)[0].status ===
            "Completed",
      );
      // The answer never comes; its connection dies, as a dead socket's does.
      assert.equal(proxy.closeMuted(), 1);
      assert.notEqual((await answer).status, 200, "the lost answer is an error to the poller");
      const retried = await call(`/jobs/${job.id}/complete`, { claim_token: job.claim_token });
      assert.equal(retried.status, 200);
      await waitFor("the ping", () => indexNow.urls.length === 1);
      // Give the drain rounds to ping again, if it would.
      await new Promise((r) => setTimeout(r, 800));
      assert.deepEqual(indexNow.urls, [editionUrl(SITE, edition)]);
      const [{ n }] = await db.sql`
        select count(*)::int as n from editions where id = ${edition} and published_at is not null`;
      assert.equal(n, 1);
      assert.equal((await rows(db))[0].delivered_at instanceof Date, true);
    } finally {
      await running.stop();
      await pool.end({ timeout: 1 });
      await proxy.close();
      await indexNow.close();
    }
  },
);

dbTest(
  "a crash right after the commit: the next process's drain delivers the ping recorded with it",
  async (db) => {
    const indexNow = startIndexNow();
    const edition = await insertEdition(db.sql);
    // Committed with the state change; no drain ran (the process died at the commit).
    await db.sql.begin(async (tx) => {
      await tx`update editions set published_at = now() where id = ${edition}`;
      await recordPing(tx, edition);
    });
    const running = await startDrain(db, indexNow.settings);
    try {
      await waitFor("the ping", () => indexNow.urls.length === 1);
      assert.deepEqual(indexNow.urls, [editionUrl(SITE, edition)]);
    } finally {
      await running.stop();
      await indexNow.close();
    }
  },
);

dbTest("a ping is recorded once per edition and asset version", async (db) => {
  const a = await insertEdition(db.sql);
  const b = await insertEdition(db.sql);
  // Every order of records, repeated: one row per (edition, version).
  for (const id of [a, b, a, a, b]) await recordPing(db.sql, id);
  await db.sql`update editions set asset_version = asset_version + 1 where id = ${a}`;
  for (const id of [a, a]) await recordPing(db.sql, id);
  const keys = (await rows(db)).map((r) => r.dedup_key);
  assert.deepEqual(keys, [`edition-${a}-v0`, `edition-${b}-v0`, `edition-${a}-v1`]);
  // A rolled-back record leaves nothing.
  const c = await insertEdition(db.sql);
  await assert.rejects(db.sql.begin(async (tx) => {
    await recordPing(tx, c);
    throw new Error("roll back");
  }));
  assert.equal((await rows(db)).length, 3);
});

dbTest(
  "one drain delivers: a second stands by under the lock and takes over when the first stops",
  async (db) => {
    const indexNow = startIndexNow();
    const first = await startDrain(db, indexNow.settings);
    await waitFor("the first drain's lock", () => first.lock.held);
    const second = await startDrain(db, indexNow.settings);
    try {
      const ids = [];
      for (let i = 0; i < 30; i++) ids.push(await insertEdition(db.sql, `Book ${i}`));
      for (const id of ids.slice(0, 15)) await recordPing(db.sql, id);
      await waitFor("15 pings marked", () => first.drain.delivered === 15);
      assert.equal(second.lock.held, false);
      assert.equal(second.drain.delivered, 0);
      await first.stop();
      await waitFor("the second drain's lock", () => second.lock.held);
      for (const id of ids.slice(15)) await recordPing(db.sql, id);
      await waitFor("30 pings marked", () => second.drain.delivered === 15);
      assert.equal(new Set(indexNow.urls).size, 30, "none twice");
      assert.deepEqual([first.drain.delivered, second.drain.delivered], [15, 15]);
    } finally {
      await second.stop();
      await first.stop().catch(() => {});
      await indexNow.close();
    }
  },
);

dbTest("a failing endpoint is tried again with backoff until it answers", async (db) => {
  const indexNow = startIndexNow();
  indexNow.state.failing = true;
  const running = await startDrain(db, indexNow.settings);
  try {
    const edition = await insertEdition(db.sql);
    await recordPing(db.sql, edition);
    await waitFor("a failed try", () => running.drain.failures >= 1);
    const [row] = await db.sql`select attempt_count, last_error, next_attempt_at > now() as later
                               from outbox`;
    assert.deepEqual([row.attempt_count, row.later], [1, true]);
    assert.match(row.last_error, /IndexNow answered 500/);
    indexNow.state.failing = false;
    await waitFor("the ping", () => indexNow.urls.length === 1, 5000);
    // The endpoint answers before the drain's mark commits: wait for the mark, not the request.
    await waitFor("the row marked", () => running.drain.delivered === 1);
    assert.equal((await rows(db))[0].delivered_at instanceof Date, true);
  } finally {
    await running.stop();
    await indexNow.close();
  }
});
