/**
 * Readiness vs liveness, the event stream during shutdown, HEAD, ids
 * up to the bigint range, 405, 503 for an unavailable database, relative paths, secrets, and the
 * token file written create-new.
 */
import { testControl } from "../../_api.ts";
import assert from "node:assert/strict";
import { createApi, loadOrCreateToken } from "../../../lib/http/api.ts";
import { connect } from "../../../lib/db.ts";
import { Lifecycle } from "../../../lib/lifecycle.ts";
import { parseConfig } from "../../../lib/config.ts";
import * as ingestion from "../../../queues/ingestion/mod.ts";
import { ingestionRoutes } from "../../../queues/ingestion/routes.ts";
import { dbTest, type TestDb } from "../../_db.ts";
import { ingestionContext, insertJob, jobRow } from "../../_ingestion.ts";
import { freePort } from "../../_fs.ts";

const TOKEN = "api-test-token-0123456789";
const auth = { authorization: `Bearer ${TOKEN}` };

async function setup(db: TestDb, sql = db.sql) {
  const ctx = { ...(await ingestionContext(db)), sql };
  const lifecycle = new Lifecycle(ctx.log, 2000);
  let ready = true;
  const app = createApi({
    token: TOKEN,
    log: ctx.log,
    events: ctx.events,
    lifecycle,
    health: () => Promise.resolve({ bootId: ctx.bootId }),
    ready: () => Promise.resolve({ ready, checks: { listener: ready ? "live" : "degraded" } }),
    routes: { "/ingestion": ingestionRoutes(ctx, testControl(ctx)) },
  });
  return { ctx, app, lifecycle, setReady: (r: boolean) => (ready = r) };
}

dbTest(
  "/readyz follows readiness and is 503 from the first signal; /healthz stays 200",
  async (db) => {
    const { app, lifecycle, setReady } = await setup(db);
    assert.equal((await app.request("/readyz")).status, 200);
    setReady(false);
    const unready = await app.request("/readyz");
    assert.equal(unready.status, 503);
    assert.equal((await unready.json()).checks.listener, "degraded");
    setReady(true);
    await lifecycle.shutdown();
    const stopping = await app.request("/readyz");
    assert.equal(stopping.status, 503);
    assert.equal((await stopping.json()).status, "stopping");
    assert.equal((await app.request("/healthz")).status, 200);
  },
);

dbTest("GET /internal/events is refused with 503 from the first signal", async (db) => {
  const { app, lifecycle } = await setup(db);
  await lifecycle.shutdown();
  const res = await app.request("/internal/events", { headers: auth });
  assert.equal(res.status, 503);
  assert.match((await res.json()).error, /Shutting down/);
});

dbTest("HEAD /internal/events answers without subscribing", async (db) => {
  const { app, ctx } = await setup(db);
  const res = await app.request("/internal/events", { method: "HEAD", headers: auth });
  assert.equal(res.status, 200);
  assert.match(res.headers.get("content-type") ?? "", /text\/event-stream/);
  assert.equal(ctx.events.subscribers, 0);
});

dbTest("Job ids are accepted up to the bigint maximum", async (db) => {
  const { app } = await setup(db);
  const max = await app.request("/internal/ingestion/jobs/9223372036854775807", { headers: auth });
  assert.equal(max.status, 404);
  const nineteen = await app.request("/internal/ingestion/jobs/1000000000000000000", {
    headers: auth,
  });
  assert.equal(nineteen.status, 404);
  const over = await app.request("/internal/ingestion/jobs/9223372036854775808", { headers: auth });
  assert.equal(over.status, 400);
});

dbTest("A wrong method on a known path is 405 with Allow, also on mounted routes", async (db) => {
  const { app } = await setup(db);
  const res = await app.request("/internal/ingestion/jobs/1", { method: "DELETE", headers: auth });
  assert.equal(res.status, 405);
  assert.match(res.headers.get("allow") ?? "", /GET/);
  assert.equal(typeof (await res.json()).error, "string");
  const ready = await app.request("/readyz", { method: "POST" });
  assert.equal(ready.status, 405);
  assert.equal((await app.request("/nowhere", { method: "DELETE" })).status, 404);
});

dbTest("A database that refuses connections makes API calls 503, not 500", async (db) => {
  const down = connect(`postgres://postgres@127.0.0.1:${freePort()}/none`, {
    schema: db.schema,
    applicationName: "t-down",
    max: 1,
  });
  try {
    const { app } = await setup(db, down);
    const res = await app.request("/internal/ingestion/jobs/1", { headers: auth });
    assert.equal(res.status, 503);
    assert.match((await res.json()).error, /Database unavailable/);
  } finally {
    await down.end({ timeout: 1 });
  }
});

dbTest("A job error names its file relative to STORAGE_DIR", async (db) => {
  const ctx = await ingestionContext(db);
  await Deno.mkdir(`${ctx.storageDir}/books`);
  // Deleted after the enqueue: the run's error comes from the file system, which names it.
  const id = await insertJob(db, "books/gone.txt");
  const job = await ingestion.claim(ctx);
  assert.ok(job);
  await ingestion.run(ctx, job, new AbortController().signal);
  const row = await jobRow(db, id);
  assert.ok(row.error, "the job has an error");
  assert.ok(!row.error.includes(ctx.storageDir), `no absolute path: ${row.error}`);
  const real = await Deno.realPath(ctx.storageDir);
  assert.ok(!row.error.includes(real), `no absolute path: ${row.error}`);
  assert.match(row.error, /books\/gone\.txt/);
});

Deno.test("parseConfig() never echoes a wrong INTERNAL_API_TOKEN", () => {
  assert.throws(
    () => parseConfig({ INTERNAL_API_TOKEN: "hunter2-secret" }),
    (err: Error) => {
      assert.match(err.message, /INTERNAL_API_TOKEN/);
      assert.ok(!err.message.includes("hunter2"), err.message);
      return true;
    },
  );
});

Deno.test("loadOrCreateToken() gives two racing processes one token", async () => {
  const dir = await Deno.makeTempDir();
  const { createLogger } = await import("../../../lib/log.ts");
  const log = createLogger("silent");
  try {
    const tokens = await Promise.all(Array.from({ length: 8 }, () => loadOrCreateToken(dir, log)));
    assert.equal(new Set(tokens).size, 1);
    assert.equal((await Deno.readTextFile(`${dir}/internal_api_token`)).trim(), tokens[0]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
