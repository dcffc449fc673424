import assert from "node:assert/strict";
import { adminRoutes, SESSION_COOKIE } from "../lib/admin.tsx";
import { Lifecycle } from "../lib/lifecycle.ts";
import { StatsCache } from "../lib/stats_cache.ts";
import { ingestionView } from "../queues/ingestion_view.ts";
import { dbTest, type TestDb } from "./_db.ts";
import { ingestionContext, insertJob } from "./_ingestion.ts";

const TOKEN = "admin-test-token-0123456789";
const ORIGIN = "http://localhost";

async function setup(db: TestDb) {
  const ctx = await ingestionContext(db);
  const cache = new StatsCache({
    sql: db.sql,
    schema: db.schema,
    views: [ingestionView],
    log: ctx.log,
  });
  const app = adminRoutes({
    token: TOKEN,
    views: [ingestionView],
    cache,
    ctx,
    locks: new Map(),
    events: ctx.events,
    lifecycle: new Lifecycle(ctx.log, 2000),
    log: ctx.log,
  });
  const form = (path: string, body: Record<string, string>, headers: Record<string, string> = {}) =>
    app.request(`${ORIGIN}${path}`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", origin: ORIGIN, ...headers },
      body: new URLSearchParams(body).toString(),
    });
  const login = async () => {
    const res = await form("/admin/login", { token: TOKEN });
    assert.equal(res.status, 303);
    const cookie = res.headers.get("set-cookie") ?? "";
    return { cookie: cookie.split(";")[0], header: cookie };
  };
  return { ctx, cache, app, form, login };
}

dbTest(
  "/admin: a wrong token is refused; the session cookie is HttpOnly, SameSite=Strict, signed",
  async (db) => {
    const { app, form, login } = await setup(db);
    const wrong = await form("/admin/login", { token: "nope-nope-nope-nope" });
    assert.equal(wrong.status, 401);
    assert.equal(wrong.headers.get("set-cookie"), null);
    const unauth = await app.request(`${ORIGIN}/admin`);
    assert.equal(unauth.status, 303);
    assert.equal(unauth.headers.get("location"), "/admin/login");

    const { cookie, header } = await login();
    assert.match(header, /HttpOnly/);
    assert.match(header, /SameSite=Strict/);
    assert.match(header, /Path=\/admin/);
    assert.ok(!header.includes(TOKEN), "the cookie must not carry the token");
    const ok = await app.request(`${ORIGIN}/admin`, { headers: { cookie } });
    assert.equal(ok.status, 200);
    assert.match(await ok.text(), /ingestion/);
    // A forged value (the signature no longer matches) is no session.
    const forged = cookie.replace(/=(\d)/, (_m, d) => `=${(Number(d) + 1) % 10}`);
    assert.equal(
      (await app.request(`${ORIGIN}/admin`, { headers: { cookie: forged } })).status,
      303,
    );
  },
);

dbTest(
  "/admin form posts from another origin are refused (CSRF), even with the cookie",
  async (db) => {
    const { form, login, ctx } = await setup(db);
    const { cookie } = await login();
    const id = await insertJob(db, "a.txt");
    await ctx.sql`update ingestion_jobs set status = 'Failed', error = 'x' where id = ${id}`;
    const res = await form(`/admin/queues/ingestion/jobs/${id}/retry`, {}, {
      cookie,
      origin: "http://evil.example",
      "sec-fetch-site": "cross-site",
    });
    assert.equal(res.status, 403);
    const [row] = await ctx.sql`select status from ingestion_jobs where id = ${id}`;
    assert.equal(row.status, "Failed");
  },
);

dbTest("/admin job page offers retry for a Failed job only; retry re-queues it", async (db) => {
  const { app, form, login, ctx } = await setup(db);
  const { cookie } = await login();
  const queued = await insertJob(db, "q.txt");
  const failed = await insertJob(db, "f.txt");
  await ctx
    .sql`update ingestion_jobs set status = 'Failed', error = 'bad file' where id = ${failed}`;
  const page = async (id: string) =>
    await (await app.request(`${ORIGIN}/admin/queues/ingestion/jobs/${id}`, {
      headers: { cookie },
    }))
      .text();
  assert.doesNotMatch(await page(queued), /Retry job/);
  assert.match(await page(failed), /<button type="submit">Retry job #/);

  const refused = await form(`/admin/queues/ingestion/jobs/${queued}/retry`, {}, { cookie });
  assert.equal(refused.status, 409);
  const retried = await form(`/admin/queues/ingestion/jobs/${failed}/retry`, {}, { cookie });
  assert.equal(retried.status, 303);
  const [row] = await ctx
    .sql`select status, attempt_count, error from ingestion_jobs where id = ${failed}`;
  assert.deepEqual({ ...row }, { status: "Queued", attempt_count: 0, error: null });

  // The queue page filters by status, newest first.
  const list = await (await app.request(`${ORIGIN}/admin/queues/ingestion?status=Queued`, {
    headers: { cookie },
  })).text();
  assert.ok(list.indexOf(`data-job="${failed}"`) < list.indexOf(`data-job="${queued}"`));
  assert.equal(SESSION_COOKIE, "textstack_admin");
});
