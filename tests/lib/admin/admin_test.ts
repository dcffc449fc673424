import { testControl } from "../../_api.ts";
import assert from "node:assert/strict";
import { type AdminDeps, adminRoutes } from "../../../lib/admin/dashboard.tsx";
import { ADMIN_MAX_BODY_BYTES, SESSION_COOKIE } from "../../../lib/admin/access.tsx";
import { LOGIN_ATTEMPTS, LOGIN_WINDOW_MS } from "../../../lib/admin/login_limit.ts";
import { Lifecycle } from "../../../lib/lifecycle.ts";
import { StatsCache } from "../../../lib/admin/stats_cache.ts";
import { ingestionView } from "../../../queues/ingestion/view.ts";
import { userIngestionView } from "../../../queues/user_ingestion/view.ts";
import { enrichmentView } from "../../../queues/enrichment/view.ts";
import { ssgView } from "../../../queues/ssg/view.ts";
import { autoPublishView } from "../../../queues/auto_publish/view.ts";
import { seoView } from "../../../queues/seo_backfill/view.ts";
import type { QueueView } from "../../../lib/admin/queue_view.ts";
import { dbTest, type TestDb, waitFor } from "../../_db.ts";
import { ingestionContext, insertJob } from "../../_ingestion.ts";

const TOKEN = "admin-test-token-0123456789";
const ORIGIN = "http://localhost";
const ALL_VIEWS = [
  ingestionView,
  userIngestionView,
  enrichmentView,
  ssgView,
  autoPublishView,
  seoView,
];

async function setup(
  db: TestDb,
  views: QueueView[] = [ingestionView],
  loginLimit?: AdminDeps["loginLimit"],
) {
  const ctx = await ingestionContext(db);
  const cache = new StatsCache({ sql: db.sql, schema: db.schema, views, log: ctx.log });
  const control = testControl(ctx, db.schema);
  await control.refresh();
  const app = adminRoutes({
    token: TOKEN,
    views,
    cache,
    ctx,
    control,
    locks: new Map(),
    events: ctx.events,
    lifecycle: new Lifecycle(ctx.log, 2000),
    log: ctx.log,
    loginLimit,
  });
  const form = (
    path: string,
    body: Record<string, string>,
    headers: Record<string, string> = {},
    peer = "127.0.0.1",
  ) =>
    app.request(
      `${ORIGIN}${path}`,
      {
        method: "POST",
        headers: {
          "content-type": "application/x-www-form-urlencoded",
          origin: ORIGIN,
          ...headers,
        },
        body: new URLSearchParams(body).toString(),
      },
      // What Deno.serve hands Hono as `c.env`: the TCP peer.
      { remoteAddr: { transport: "tcp", hostname: peer, port: 40000 } },
    );
  const login = async () => {
    const res = await form("/admin/login", { token: TOKEN });
    assert.equal(res.status, 303);
    const cookie = res.headers.get("set-cookie") ?? "";
    return { cookie: cookie.split(";")[0], header: cookie };
  };
  return { ctx, cache, app, form, login, control };
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
    const forged = cookie.replace(/=(.)/, (_m, ch) => `=${ch === "0" ? "1" : "0"}`);
    assert.notEqual(forged, cookie);
    assert.equal(
      (await app.request(`${ORIGIN}/admin`, { headers: { cookie: forged } })).status,
      303,
    );
  },
);

dbTest(
  "/admin sign-out ends the session: the old cookie no longer opens /admin; a restart signs everyone out",
  async (db) => {
    const { app, form, login } = await setup(db);
    const { cookie } = await login();
    const other = await login();
    assert.equal((await app.request(`${ORIGIN}/admin`, { headers: { cookie } })).status, 200);
    const out = await form("/admin/logout", {}, { cookie });
    assert.equal(out.status, 303);
    assert.equal(out.headers.get("location"), "/admin/login");
    // The browser drops its copy; a copy kept elsewhere (or replayed) is refused all the same.
    assert.match(out.headers.get("set-cookie") ?? "", /Max-Age=0/);
    const replayed = await app.request(`${ORIGIN}/admin`, { headers: { cookie } });
    assert.equal(replayed.status, 303);
    assert.equal(replayed.headers.get("location"), "/admin/login");
    assert.equal((await form("/admin/logout", {}, { cookie })).status, 401);
    // Only that session ended: another sign-in still works.
    const still = await app.request(`${ORIGIN}/admin`, { headers: { cookie: other.cookie } });
    assert.equal(still.status, 200);
    // Sessions live in the process: a new one (same token) knows none of them.
    const restarted = await setup(db);
    const after = await restarted.app.request(`${ORIGIN}/admin`, {
      headers: { cookie: other.cookie },
    });
    assert.equal(after.status, 303);
  },
);

dbTest(
  "/admin sign-in is rate-limited per client address: 429 with Retry-After past 10 refusals",
  async (db) => {
    const { form } = await setup(db);
    const wrong = (peer: string) => form("/admin/login", { token: "wrong-wrong-wrong" }, {}, peer);
    const right = (peer: string) => form("/admin/login", { token: TOKEN }, {}, peer);
    // Successful sign-ins are not counted.
    for (let i = 0; i < 3; i++) assert.equal((await right("192.0.2.7")).status, 303);
    for (let i = 1; i <= LOGIN_ATTEMPTS; i++) {
      const res = await wrong("192.0.2.7");
      assert.equal(res.status, 401, `refusal ${i}`);
      assert.equal(res.headers.get("ratelimit-remaining"), String(LOGIN_ATTEMPTS - i));
    }
    const limited = await wrong("192.0.2.7");
    assert.equal(limited.status, 429);
    const retryAfter = Number(limited.headers.get("retry-after"));
    assert.ok(
      retryAfter > LOGIN_WINDOW_MS / 1000 - 5 && retryAfter <= LOGIN_WINDOW_MS / 1000,
      `Retry-After ${retryAfter}`,
    );
    assert.match(await limited.text(), /Too many refused sign-ins/);
    // Past the limit even the right token waits: guessing cannot go on between good sign-ins.
    const locked = await right("192.0.2.7");
    assert.equal(locked.status, 429);
    assert.equal(locked.headers.get("set-cookie"), null);
    // Another address has its own budget; an IPv6 host's whole /64 shares one.
    assert.equal((await right("198.51.100.1")).status, 303);
    for (let i = 0; i < LOGIN_ATTEMPTS; i++) await wrong(`2001:db8:0:1::${i + 1}`);
    assert.equal((await wrong("2001:db8:0:1:ffff::9")).status, 429);
    assert.equal((await wrong("2001:db8:0:2::1")).status, 401);
  },
);

dbTest("/admin sign-in rate limit ends with its window", async (db) => {
  const { form } = await setup(db, [ingestionView], { attempts: 2, windowMs: 1000 });
  for (let i = 0; i < 2; i++) {
    assert.equal((await form("/admin/login", { token: "wrong-wrong-wrong" })).status, 401);
  }
  assert.equal((await form("/admin/login", { token: TOKEN })).status, 429);
  await waitFor(
    "the window to end",
    async () => (await form("/admin/login", { token: TOKEN })).status === 303,
    5000,
    100,
  );
});

dbTest(
  "/admin pages carry a CSP of this origin only, X-Frame-Options DENY; style and script are served files",
  async (db) => {
    const { app, form, login } = await setup(db);
    const { cookie } = await login();
    const answers = [
      await app.request(`${ORIGIN}/admin/login`),
      await app.request(`${ORIGIN}/admin`, { headers: { cookie } }),
      await app.request(`${ORIGIN}/admin`),
      await app.request(`${ORIGIN}/admin/queues/ingestion`, { headers: { cookie } }),
      await app.request(`${ORIGIN}/admin/queues/nope`, { headers: { cookie } }),
      await form("/admin/login", { token: "wrong-wrong-wrong" }),
    ];
    for (const res of answers) {
      const csp = res.headers.get("content-security-policy") ?? "";
      const directives = new Map(
        csp.split(";").map((d) => d.trim().split(/\s+/)).map(([k, ...v]) => [k, v.join(" ")]),
      );
      assert.equal(directives.get("default-src"), "'none'", `${res.url} ${csp}`);
      for (const name of ["script-src", "style-src", "connect-src", "form-action"]) {
        assert.equal(directives.get(name), "'self'", `${name} in ${csp}`);
      }
      assert.equal(directives.get("frame-ancestors"), "'none'");
      assert.equal(res.headers.get("x-frame-options"), "DENY");
      assert.equal(res.headers.get("x-content-type-options"), "nosniff");
      await res.body?.cancel();
    }
    // Nothing inline for the CSP to block: the pages link the served style and script.
    const page = await (await app.request(`${ORIGIN}/admin`, { headers: { cookie } })).text();
    assert.doesNotMatch(page, /<style|<script>|\son[a-z]+=/i);
    assert.match(page, /<link rel="stylesheet" href="\/admin\/assets\/dashboard.css"/);
    assert.match(page, /<script src="\/admin\/assets\/live.js"><\/script>/);
    // Served without a session (the sign-in page is styled), with their types.
    for (
      const [path, type, text] of [
        ["/admin/assets/dashboard.css", /^text\/css/, /header\{background:#1f2a44/],
        ["/admin/assets/live.js", /^text\/javascript/, /new EventSource\("\/admin\/events"\)/],
      ] as const
    ) {
      const res = await app.request(`${ORIGIN}${path}`);
      assert.equal(res.status, 200, path);
      assert.match(res.headers.get("content-type") ?? "", type);
      assert.match(await res.text(), text);
    }
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

dbTest(
  "/admin covers all six queues; retry follows each queue's own rule",
  async (db) => {
    const { app, form, login } = await setup(db, ALL_VIEWS);
    const { cookie } = await login();
    const get = async (path: string) => {
      const res = await app.request(`${ORIGIN}${path}`, { headers: { cookie } });
      return { status: res.status, text: await res.text() };
    };
    const overview = await get("/admin");
    for (const view of ALL_VIEWS) {
      assert.match(overview.text, new RegExp(`data-queue="${view.name}"`));
      assert.equal((await get(`/admin/queues/${view.name}`)).status, 200, view.name);
    }
    // A former name (before the queue took its folder's name) still opens the queue's page.
    for (const [alias, name] of [["auto-publish", "auto_publish"], ["seo", "seo_backfill"]]) {
      const page = await get(`/admin/queues/${alias}`);
      assert.equal(page.status, 200, alias);
      assert.match(page.text, new RegExp(`Queue ${name}`), alias);
    }
    assert.match(overview.text, /host poller/);

    // ssg: a Failed rebuild is not re-queued while another Full rebuild is Queued.
    const [{ id: failedSsg }] = await db.sql<{ id: string }[]>`
      insert into ssg_rebuild_jobs (status, error, finished_at)
      values ('Failed', 'render failed', now()) returning id`;
    await db.sql`insert into ssg_rebuild_jobs (status) values ('Queued')`;
    assert.match((await get(`/admin/queues/ssg/jobs/${failedSsg}`)).text, /Retry job #/);
    const refused = await form(`/admin/queues/ssg/jobs/${failedSsg}/retry`, {}, { cookie });
    assert.equal(refused.status, 409);
    assert.match(await refused.text(), /another Full rebuild is already Queued/);
    const [ssgRow] = await db.sql`select status from ssg_rebuild_jobs where id = ${failedSsg}`;
    assert.equal(ssgRow.status, "Failed");

    // auto-publish: retried, unless its edition has another job in flight.
    const [{ id: edition }] = await db.sql<{ id: string }[]>`
      insert into editions (title, format) values ('Fables', 'txt') returning id`;
    const [{ id: failedPub }] = await db.sql<{ id: string }[]>`
      insert into auto_publish_jobs (edition_id, status, error, finished_at)
      values (${edition}, 'Failed', 'publish step failed', now()) returning id`;
    const [{ id: queuedPub }] = await db.sql<{ id: string }[]>`
      insert into auto_publish_jobs (edition_id) values (${edition}) returning id`;
    const busy = await form(`/admin/queues/auto-publish/jobs/${failedPub}/retry`, {}, { cookie });
    assert.equal(busy.status, 409);
    assert.match(await busy.text(), /already has a Queued or Running job/);
    await db.sql`update auto_publish_jobs set status = 'Completed' where id = ${queuedPub}`;
    const ok = await form(`/admin/queues/auto-publish/jobs/${failedPub}/retry`, {}, { cookie });
    assert.equal(ok.status, 303);
    const [pubRow] = await db.sql`select status from auto_publish_jobs where id = ${failedPub}`;
    assert.equal(pubRow.status, "Queued");
    // The dashboard never shows a claim token.
    await db
      .sql`update auto_publish_jobs set claim_token = gen_random_uuid() where id = ${failedPub}`;
    assert.doesNotMatch(
      (await get(`/admin/queues/auto-publish/jobs/${failedPub}`)).text,
      /claim_token/,
    );

    // enrichment: Failed → Pending (its own runnable status); the job id is the user book's.
    const [{ id: book }] = await db.sql<{ id: string }[]>`
      insert into user_books (owner_id, status, metadata_enrichment_status,
                              metadata_enrichment_attempt_count, metadata_enrichment_error)
      values (7, 'Ready', 'Failed', 3, 'HTTP 400') returning id`;
    const page = await get(`/admin/queues/enrichment?status=Failed`);
    assert.match(page.text, new RegExp(`data-job="${book}"`));
    const enriched = await form(`/admin/queues/enrichment/jobs/${book}/retry`, {}, { cookie });
    assert.equal(enriched.status, 303);
    const [bookRow] = await db.sql`
      select metadata_enrichment_status as status, metadata_enrichment_attempt_count as attempts
      from user_books where id = ${book}`;
    assert.deepEqual({ ...bookRow }, { status: "Pending", attempts: 0 });
    const again = await form(`/admin/queues/enrichment/jobs/${book}/retry`, {}, { cookie });
    assert.equal(again.status, 409);
    assert.match(await again.text(), /it is Pending; only Failed jobs can be retried/);

    // A status filter the queue does not have, and an id past the bigint range.
    assert.equal((await get("/admin/queues/enrichment?status=Queued")).status, 400);
    assert.equal((await get("/admin/queues/ssg/jobs/9223372036854775808")).status, 404);
    assert.equal((await get("/admin/queues/ssg/jobs/9223372036854775807")).status, 404);
  },
);

dbTest(
  "/admin form posts over 4 KiB are refused with 413 before they are read, signed in or not",
  async (db) => {
    const { form, login } = await setup(db);
    // Unauthenticated: a huge sign-in form must not be buffered whole (memory) nor compared.
    const big = await form("/admin/login", { token: "x".repeat(ADMIN_MAX_BODY_BYTES) });
    assert.equal(big.status, 413);
    assert.equal(big.headers.get("set-cookie"), null);
    // The real sign-in form and the retry button stay far below the limit.
    const { cookie } = await login();
    const retry = await form("/admin/queues/ingestion/jobs/1/retry", {
      pad: "x".repeat(ADMIN_MAX_BODY_BYTES),
    }, { cookie });
    assert.equal(retry.status, 413);
  },
);

dbTest(
  "/admin overview states the background count's real interval (STATS_INTERVAL_MS)",
  async (db) => {
    const ctx = await ingestionContext(db);
    const views = [ingestionView];
    const cache = new StatsCache({
      sql: db.sql,
      schema: db.schema,
      views,
      log: ctx.log,
      intervalMs: 60_000,
    });
    const app = adminRoutes({
      token: TOKEN,
      views,
      cache,
      ctx,
      control: testControl(ctx, db.schema),
      locks: new Map(),
      events: ctx.events,
      lifecycle: new Lifecycle(ctx.log, 2000),
      log: ctx.log,
    });
    const res = await app.request(`${ORIGIN}/admin/login`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", origin: ORIGIN },
      body: new URLSearchParams({ token: TOKEN }).toString(),
    });
    const cookie = (res.headers.get("set-cookie") ?? "").split(";")[0];
    const page = await (await app.request(`${ORIGIN}/admin`, { headers: { cookie } })).text();
    assert.match(page, /refreshed in the background\s+about every 60 s\./);
  },
);
