import assert from "node:assert/strict";
import { Hono } from "hono";
import { createApi, MAX_BODY_BYTES } from "../../../lib/http/api.ts";
import { transaction } from "../../../lib/db.ts";
import { Lifecycle } from "../../../lib/lifecycle.ts";
import * as ingestion from "../../../queues/ingestion/mod.ts";
import * as ingestionJobs from "../../../queues/ingestion/jobs.ts";
import { ingestionRoutes } from "../../../queues/ingestion/routes.ts";
import { testApi, testControl } from "../../_api.ts";
import { dbTest, type TestDb, waitFor } from "../../_db.ts";
import {
  ingestionContext,
  insertJob,
  jobRow,
  SMALL_BOOK,
  startConsumer,
  writeSource,
} from "../../_ingestion.ts";
import { mkfifo } from "../../_fs.ts";

const TOKEN = "api-test-token-0123456789";
const auth = { authorization: `Bearer ${TOKEN}` };

async function setup(db: TestDb) {
  const ctx = await ingestionContext(db);
  const lifecycle = new Lifecycle(ctx.log, 2000);
  const app = createApi({
    token: TOKEN,
    log: ctx.log,
    events: ctx.events,
    lifecycle,
    health: async () => (await db.sql`select 1`, { bootId: ctx.bootId }),
    routes: { "/ingestion": ingestionRoutes(ctx, testControl(ctx)) },
  });
  const post = (path: string, body: unknown, headers: Record<string, string> = auth) =>
    app.request(path, {
      method: "POST",
      headers: { ...headers, "content-type": "application/json" },
      body: typeof body === "string" ? body : JSON.stringify(body),
    });
  return { ctx, app, lifecycle, post };
}

async function expectError(res: Response, status: number, pattern: RegExp): Promise<void> {
  assert.equal(res.status, status);
  assert.match(res.headers.get("content-type") ?? "", /application\/json/);
  const body = await res.json();
  assert.equal(typeof body.error, "string");
  assert.match(body.error, pattern);
}

dbTest("GET /healthz answers without a token", async (db) => {
  const { app } = await setup(db);
  const res = await app.request("/healthz");
  assert.equal(res.status, 200);
  assert.equal((await res.json()).status, "ok");
});

dbTest(
  "/internal routes refuse every request without the right bearer token with 401, a JSON error and a Bearer challenge",
  async (db) => {
    const { app, post } = await setup(db);
    // [Authorization header, WWW-Authenticate, error]; RFC 6750 §3: no error code without a
    // bearer token (none, or another scheme), invalid_token for a wrong or malformed one.
    const cases: Array<[string | undefined, string, RegExp]> = [
      [undefined, 'Bearer realm="textstack-internal"', /Missing bearer token/],
      ["Basic dXNlcjpwYXNz", 'Bearer realm="textstack-internal"', /Unsupported Authorization/],
      ["Token abc", 'Bearer realm="textstack-internal"', /Unsupported Authorization/],
      ["Bearer", 'Bearer realm="textstack-internal", error="invalid_token"', /Malformed/],
      ["Bearer a b", 'Bearer realm="textstack-internal", error="invalid_token"', /Malformed/],
      ["Bearer nope", 'Bearer realm="textstack-internal", error="invalid_token"', /Invalid/],
    ];
    for (const [authorization, challenge, error] of cases) {
      const headers: Record<string, string> = authorization ? { authorization } : {};
      for (
        const res of [
          await app.request("/internal/ingestion/jobs/1", { headers }),
          await post("/internal/ingestion/jobs", { source_path: "a.txt" }, headers),
          await app.request("/internal/openapi.json", { headers }),
        ]
      ) {
        assert.equal(res.headers.get("www-authenticate"), challenge, String(authorization));
        await expectError(res, 401, error);
      }
    }
  },
);

dbTest(
  "POST /internal/ingestion/jobs enqueues a Queued job for a file in STORAGE_DIR",
  async (db) => {
    const { ctx, post } = await setup(db);
    await writeSource(ctx.storageDir, "book.txt", SMALL_BOOK);
    const res = await post("/internal/ingestion/jobs", { source_path: "./book.txt" });
    assert.equal(res.status, 201);
    const job = await res.json();
    assert.equal(job.status, "Queued");
    assert.equal(job.source_path, "book.txt");
    assert.equal(job.attempt_count, 0);
    assert.equal((await jobRow(db, job.id)).status, "Queued");
  },
);

dbTest(
  "GET /internal/ingestion/jobs: an unknown query parameter is a 400 that names it as a query parameter, never as the body",
  async (db) => {
    const { app } = await setup(db);
    for (const key of ["edition_id", "source_path", "x", "Status", "limit2", "%C3%A9"]) {
      for (const query of [`${key}=1`, `limit=5&${key}=`, `${key}=1&status=Failed`]) {
        const res = await app.request(`/internal/ingestion/jobs?${query}`, { headers: auth });
        await expectError(res, 400, /^Invalid query: Unrecognized key/);
      }
    }
  },
);

dbTest(
  "POST /internal/ingestion/jobs refuses bad input with a 4xx JSON error and enqueues nothing",
  async (db) => {
    const { ctx, post } = await setup(db);
    await writeSource(ctx.storageDir, "book.txt", SMALL_BOOK);
    const outside = await Deno.makeTempFile();
    await Deno.symlink(outside, `${ctx.storageDir}/link.txt`);
    await Deno.mkdir(`${ctx.storageDir}/folder.txt`);
    await Deno.symlink("loop2.txt", `${ctx.storageDir}/loop1.txt`);
    await Deno.symlink("loop1.txt", `${ctx.storageDir}/loop2.txt`);
    await mkfifo(`${ctx.storageDir}/fifo.txt`);
    const cases: Array<[unknown, number, RegExp]> = [
      ["{not json", 400, /JSON/i],
      [{}, 400, /source_path/],
      [{ source_path: 42 }, 400, /source_path/],
      [{ source_path: "book.txt", extra: 1 }, 400, /extra|Unrecognized/i],
      [{ source_path: "../../etc/passwd" }, 400, /inside STORAGE_DIR/],
      [{ source_path: outside }, 400, /inside STORAGE_DIR/],
      [{ source_path: "sub/../../book.txt" }, 400, /inside STORAGE_DIR/],
      [{ source_path: "missing.txt" }, 400, /no such file/],
      [{ source_path: "link.txt" }, 400, /outside STORAGE_DIR through a symlink/],
      [{ source_path: "folder.txt" }, 400, /not a regular file/],
      [{ source_path: "book.txt/inner.txt" }, 400, /no such file/],
      [{ source_path: `${"x".repeat(300)}.txt` }, 400, /too long/],
      [{ source_path: "loop1.txt" }, 400, /loops through symlinks/],
      [{ source_path: "fifo.txt" }, 400, /not a regular file/],
      [{ source_path: "." }, 400, /inside STORAGE_DIR/],
      [{ source_path: "book.txt", edition_id: "abc" }, 400, /edition_id/],
      [{ source_path: "book.txt", edition_id: "99" }, 400, /no such edition/],
    ];
    for (const [body, status, pattern] of cases) {
      await expectError(await post("/internal/ingestion/jobs", body), status, pattern);
    }
    await expectError(
      await post("/internal/ingestion/jobs", { source_path: "x".repeat(MAX_BODY_BYTES + 1) }),
      413,
      /exceeds/,
    );
    const [{ count }] = await db.sql`select count(*)::int from ingestion_jobs`;
    assert.equal(count, 0);
  },
);

dbTest(
  "GET /internal/ingestion/jobs/:id returns the job, 404 when unknown, 400 for a bad id",
  async (db) => {
    const { app } = await setup(db);
    const id = await insertJob(db, "a.txt");
    const res = await app.request(`/internal/ingestion/jobs/${id}`, { headers: auth });
    assert.equal(res.status, 200);
    assert.equal((await res.json()).id, id);
    await expectError(
      await app.request("/internal/ingestion/jobs/999999", { headers: auth }),
      404,
      /No such/,
    );
    await expectError(
      await app.request("/internal/ingestion/jobs/abc", { headers: auth }),
      400,
      /id/,
    );
  },
);

dbTest(
  "POST /internal/ingestion/jobs/:id/retry requeues a Failed job and answers 409 for any other status",
  async (db) => {
    const { post } = await setup(db);
    const id = await insertJob(db, "a.txt");
    for (const status of ["Queued", "Processing", "Completed"]) {
      await db.sql`update ingestion_jobs set status = ${status}, attempt_count = 1, error = 'kept'
      where id = ${id}`;
      const before = await jobRow(db, id);
      const res = await post(`/internal/ingestion/jobs/${id}/retry`, {});
      await expectError(res, 409, new RegExp(`it is ${status}; only Failed`));
      assert.deepEqual(await jobRow(db, id), before, `a 409 for ${status} changes nothing`);
    }
    await db.sql`update ingestion_jobs set status = 'Failed', attempt_count = 3, error = 'bad file'
    where id = ${id}`;
    const res = await post(`/internal/ingestion/jobs/${id}/retry`, {});
    assert.equal(res.status, 200);
    const job = await res.json();
    assert.deepEqual([job.status, job.attempt_count, job.error], ["Queued", 0, null]);
    await expectError(await post("/internal/ingestion/jobs/424242/retry", {}), 404, /No such/);
  },
);

/** Read SSE events from a response body until `count` named events arrived. */
async function readEvents(res: Response, count: number, timeoutMs = 5000) {
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  const events: Array<{ event: string; data: Record<string, unknown> }> = [];
  let buffered = "";
  const deadline = setTimeout(() => reader.cancel(), timeoutMs);
  try {
    while (events.length < count) {
      const { value, done } = await reader.read();
      if (done) break;
      buffered += value;
      let end;
      while ((end = buffered.indexOf("\n\n")) >= 0) {
        const block = buffered.slice(0, end);
        buffered = buffered.slice(end + 2);
        const event = /^event: (.*)$/m.exec(block)?.[1] ?? "message";
        const data = /^data: (.*)$/m.exec(block)?.[1] ?? "{}";
        if (event !== "ready") events.push({ event, data: JSON.parse(data) });
      }
    }
  } finally {
    clearTimeout(deadline);
    await reader.cancel().catch(() => {});
  }
  return events;
}

dbTest(
  "GET /internal/events streams committed transitions in order and never a rolled-back one",
  async (db) => {
    const { ctx, app, lifecycle } = await setup(db);
    const res = await app.request("/internal/events", { headers: auth });
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type") ?? "", /text\/event-stream/);
    await waitFor("the subscriber", () => ctx.events.subscribers === 1);
    const id = await insertJob(db, "a.txt");
    // Rolled back: the effect registered with afterCommit must never run.
    await assert.rejects(
      transaction(ctx.sql, ctx.log, async (tx) => {
        await tx.sql`update ingestion_jobs set status = 'Failed' where id = ${id}`;
        tx.afterCommit(() =>
          ctx.events.publish({
            queue: "ingestion",
            id,
            transition: "failed",
            status: "Failed",
            attempt: 0,
          })
        );
        throw new Error("roll back");
      }),
      /roll back/,
    );
    const job = await ingestion.claim(ctx);
    assert.ok(job);
    assert.equal(await ingestion.giveBack(ctx, job), true);
    await db.sql`update ingestion_jobs set status = 'Failed' where id = ${id}`;
    await ingestionJobs.retry(ctx, id);
    const events = await readEvents(res, 3);
    assert.deepEqual(
      events.map((e) => [e.event, e.data.id, e.data.status]),
      [["claimed", id, "Processing"], ["given_back", id, "Queued"], ["retried", id, "Queued"]],
    );
    const seqs = events.map((e) => e.data.seq as number);
    assert.deepEqual(seqs, [...seqs].sort((a, b) => a - b));
    await lifecycle.shutdown();
  },
);

dbTest("GET /internal/events: a client that reads nothing does not delay jobs", async (db) => {
  const { ctx, app, lifecycle } = await setup(db);
  const path = await writeSource(ctx.storageDir, "book.txt", SMALL_BOOK);
  const stuck = await app.request("/internal/events", { headers: auth });
  assert.equal(stuck.status, 200);
  await waitFor("the subscriber", () => ctx.events.subscribers === 1);
  // Far more events than the subscriber's buffer holds: it must drop, not block, the producers.
  const t0 = performance.now();
  for (let i = 0; i < 20_000; i++) {
    ctx.events.publish({
      queue: "ingestion",
      id: String(i),
      transition: "claimed",
      status: "Processing",
      attempt: 1,
    });
  }
  const publishMs = performance.now() - t0;
  assert.ok(publishMs < 1000, `20,000 publishes to a stuck subscriber took ${publishMs} ms`);
  assert.ok(ctx.events.dropped >= 20_000 - 1000, `dropped ${ctx.events.dropped}, counted`);
  const running = await startConsumer(db, ctx);
  try {
    await db
      .sql`insert into ingestion_jobs (source_path) select ${path} from generate_series(1, 50)`;
    await waitFor(
      "50 completed jobs with a stuck SSE client",
      async () => {
        const [{ count }] = await db
          .sql`select count(*)::int from ingestion_jobs where status = 'Completed'`;
        return count === 50;
      },
      20_000,
      20,
    );
  } finally {
    await running.stop();
    await lifecycle.shutdown();
    await stuck.body?.cancel();
  }
});

dbTest(
  "createApi(): a lazy app is loaded once, on the first request under its prefix, and answers as if mounted",
  async (db) => {
    const ctx = await ingestionContext(db);
    let loads = 0;
    const lazy = {
      prefix: "/lazy",
      load: async () => {
        loads++;
        await new Promise((r) => setTimeout(r, 50));
        const inner = new Hono();
        inner.get("/lazy", (c) => c.text("home"));
        inner.get("/lazy/page", (c) => c.text(`page ${(c.env as { peer?: string })?.peer}`));
        inner.post("/lazy/page", (c) => c.text("posted"));
        inner.get("/lazy/boom", () => {
          throw new Error("boom");
        });
        return inner;
      },
    };
    let attempts = 0;
    const flaky = {
      prefix: "/flaky",
      load: () => {
        if (++attempts === 1) return Promise.reject(new Error("Cannot load the module"));
        return Promise.resolve(new Hono().get("/flaky", (c) => c.text("loaded")));
      },
    };
    const app = testApi(ctx, TOKEN, {
      routes: { "/ingestion": ingestionRoutes(ctx, testControl(ctx)) },
      apps: [lazy, flaky],
    });
    assert.equal((await app.request("/healthz")).status, 200);
    assert.equal((await app.request("/internal/ingestion/jobs/1", { headers: auth })).status, 404);
    assert.equal(loads, 0, "nothing under its prefix, nothing loaded");
    // Two first requests at once: one load.
    const [a, b] = await Promise.all([
      app.request("/lazy/page", {}, { peer: "10.0.0.1" }),
      app.request("/lazy"),
    ]);
    assert.equal(await a.text(), "page 10.0.0.1", "the server's env (the TCP peer) is passed on");
    assert.equal(await b.text(), "home");
    assert.equal(loads, 1);
    assert.equal(await (await app.request("/lazy/page", { method: "POST" })).text(), "posted");
    const wrong = await app.request("/lazy/page", { method: "DELETE" });
    assert.equal(wrong.status, 405);
    assert.equal(wrong.headers.get("allow"), "GET, HEAD, POST");
    await expectError(wrong, 405, /^Method DELETE not allowed on \/lazy\/page$/);
    await expectError(
      await app.request("/lazy/nowhere"),
      404,
      /^No route for GET \/lazy\/nowhere$/,
    );
    await expectError(await app.request("/lazy/boom"), 500, /^Internal server error$/);
    assert.equal(loads, 1);
    await expectError(await app.request("/flaky"), 500, /^Internal server error$/);
    assert.equal(await (await app.request("/flaky")).text(), "loaded", "a failed load is retried");
    assert.equal(attempts, 2);
  },
);
