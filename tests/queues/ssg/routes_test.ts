import assert from "node:assert/strict";
import * as ssg from "../../../queues/ssg/mod.ts";
import { editionRoutes, ssgRoutes } from "../../../queues/ssg/routes.ts";
import { testApi, testControl } from "../../_api.ts";
import { dbTest, type TestDb } from "../../_db.ts";
import { insertEdition, ssgContext, ssgJob } from "../../_ssg.ts";

const TOKEN = "ssg-test-token-0123456789";

async function setup(db: TestDb) {
  const ctx = await ssgContext(db);
  const app = testApi(ctx, TOKEN, {
    routes: { "/ssg": ssgRoutes(ctx, testControl(ctx)), "/editions": editionRoutes(ctx) },
  });
  const request = async (method: string, path: string) => {
    const res = await app.request(path, {
      method,
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    return { status: res.status, body: await res.json() };
  };
  return { ctx, request };
}

dbTest(
  "POST /internal/ssg/rebuild-all answers 201 with a new job, then 200 with it",
  async (db) => {
    const { ctx, request } = await setup(db);
    const created = await request("POST", "/internal/ssg/rebuild-all");
    assert.equal(created.status, 201);
    assert.deepEqual([created.body.kind, created.body.status], ["Full", "Queued"]);
    const again = await request("POST", "/internal/ssg/rebuild-all");
    assert.deepEqual([again.status, again.body.id], [200, created.body.id]);

    await ssg.claim(ctx);
    const running = await request("POST", "/internal/ssg/rebuild-all");
    assert.deepEqual([running.status, running.body.id, running.body.status], [
      200,
      created.body.id,
      "Running",
    ]);
    await db.sql`update ssg_rebuild_jobs set status = 'Completed'`;
    const fresh = await request("POST", "/internal/ssg/rebuild-all");
    assert.equal(fresh.status, 201);
    assert.notEqual(fresh.body.id, created.body.id);
  },
);

dbTest(
  "GET /internal/ssg/jobs/:id answers the job, 404 when unknown, 400 for a bad id",
  async (db) => {
    const { request } = await setup(db);
    const { body: job } = await request("POST", "/internal/ssg/rebuild-all");
    const got = await request("GET", `/internal/ssg/jobs/${job.id}`);
    assert.deepEqual([got.status, got.body.id, got.body.status], [200, job.id, "Queued"]);
    assert.equal((await request("GET", "/internal/ssg/jobs/999999")).status, 404);
    assert.equal((await request("GET", "/internal/ssg/jobs/abc")).status, 400);
  },
);

dbTest(
  "POST /internal/ssg/jobs/:id/retry: 200 for Failed, 409 otherwise, changing nothing",
  async (db) => {
    const { ctx, request } = await setup(db);
    const { body: job } = await request("POST", "/internal/ssg/rebuild-all");
    const queued = await request("POST", `/internal/ssg/jobs/${job.id}/retry`);
    assert.deepEqual([queued.status, queued.body.status], [409, "Queued"]);
    await ssg.claim(ctx);
    await ssg.recover(ctx, new AbortController().signal);
    const { body: other } = await request("POST", "/internal/ssg/rebuild-all");
    const blocked = await request("POST", `/internal/ssg/jobs/${job.id}/retry`);
    assert.equal(blocked.status, 409);
    assert.match(blocked.body.error, /already Queued/);
    assert.equal((await ssgJob(db, job.id)).status, "Failed");
    await db.sql`delete from ssg_rebuild_jobs where id = ${other.id}`;
    const retried = await request("POST", `/internal/ssg/jobs/${job.id}/retry`);
    assert.deepEqual([retried.status, retried.body.status, retried.body.error], [
      200,
      "Queued",
      null,
    ]);
    assert.equal((await request("POST", "/internal/ssg/jobs/424242/retry")).status, 404);
  },
);

dbTest(
  "POST /internal/editions/:id/publish and /unpublish write published_at and queue a rebuild",
  async (db) => {
    const { ctx, request } = await setup(db);
    const id = await insertEdition(db, ctx.storageDir, {
      title: "A",
      chapters: [],
      published: false,
    });
    const published = await request("POST", `/internal/editions/${id}/publish`);
    assert.equal(published.status, 200);
    assert.equal(published.body.edition.id, id);
    assert.ok(published.body.edition.published_at);
    assert.equal(published.body.rebuild.status, "Queued");
    const again = await request("POST", `/internal/editions/${id}/publish`);
    assert.equal(again.body.edition.published_at, published.body.edition.published_at);
    assert.equal(again.body.rebuild.id, published.body.rebuild.id);
    const unpublished = await request("POST", `/internal/editions/${id}/unpublish`);
    assert.deepEqual([unpublished.status, unpublished.body.edition.published_at], [200, null]);
    const [row] = await db.sql`select published_at from editions where id = ${id}`;
    assert.equal(row.published_at, null);
    const missing = await request("POST", "/internal/editions/999999/publish");
    assert.deepEqual([missing.status, missing.body.error], [404, "No such edition: 999999"]);
    const [{ n }] = await db.sql`select count(*)::int as n from ssg_rebuild_jobs`;
    assert.equal(n, 1);
  },
);
