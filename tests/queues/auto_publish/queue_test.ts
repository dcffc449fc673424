import assert from "node:assert/strict";
import { dbTest } from "../../_db.ts";
import { HOST_TOKEN, hostApi, insertEdition, insertFailures, snapshot } from "../../_host.ts";
import * as autoPublish from "../../../queues/auto_publish/mod.ts";
import * as autoPublishJobs from "../../../queues/auto_publish/jobs.ts";
import { ingestionContext, insertJob, SMALL_BOOK, writeSource } from "../../_ingestion.ts";
import * as ingestion from "../../../queues/ingestion/mod.ts";

async function jobRow(db: { sql: import("../../../lib/db.ts").Sql }, id: string) {
  const [row] = await db.sql`select * from auto_publish_jobs where id = ${id}`;
  return row;
}

dbTest(
  "POST /auto-publish/jobs creates a Queued job; a second for the edition is a 409",
  async (db) => {
    const { call } = hostApi(db);
    const edition = await insertEdition(db.sql);
    const res = await call("POST", "/auto-publish/jobs", {
      edition_id: Number(edition),
      priority: 3,
    });
    assert.equal(res.status, 201);
    const job = await res.json();
    assert.deepEqual([job.edition_id, job.status, job.priority, job.attempt_count], [
      edition,
      "Queued",
      3,
      0,
    ]);
    assert.equal(job.claim_token, undefined);
    const again = await call("POST", "/auto-publish/jobs", { edition_id: edition });
    assert.equal(again.status, 409);
    const body = await again.json();
    assert.match(body.error, /already Queued/);
    assert.equal(body.job.id, job.id);
    assert.equal((await db.sql`select count(*)::int as n from auto_publish_jobs`)[0].n, 1);
    const missing = await call("POST", "/auto-publish/jobs", { edition_id: "999999" });
    assert.equal(missing.status, 404);
  },
);

dbTest(
  "create() refuses while Running too, and allows a new job once the last one ended",
  async (db) => {
    const { call } = hostApi(db);
    const edition = await insertEdition(db.sql);
    await call("POST", "/auto-publish/jobs", { edition_id: edition });
    const claimed = (await (await call("POST", "/auto-publish/jobs/claim")).json()).jobs[0];
    assert.equal(claimed.status, "Running");
    assert.equal((await call("POST", "/auto-publish/jobs", { edition_id: edition })).status, 409);
    await call("POST", `/auto-publish/jobs/${claimed.id}/complete`, {
      claim_token: claimed.claim_token,
    });
    assert.equal((await call("POST", "/auto-publish/jobs", { edition_id: edition })).status, 201);
  },
);

dbTest(
  "the breaker: 5 Failed in 24 h refuse creation with the time it is allowed again",
  async (db) => {
    const { call } = hostApi(db);
    const edition = await insertEdition(db.sql);
    // Five failures 23 h ago (a minute apart), one older than the window.
    await insertFailures(db.sql, edition, 1, 30);
    await insertFailures(db.sql, edition, 5, 23);
    const before = await snapshot(db.sql, "auto_publish_jobs");
    const res = await call("POST", "/auto-publish/jobs", { edition_id: edition });
    assert.equal(res.status, 409);
    const body = await res.json();
    assert.match(body.error, /5 jobs Failed in the last 24 h/);
    const [{ expected }] = await db.sql`
    select min(finished_at) + interval '24 hours' as expected from auto_publish_jobs
    where finished_at > now() - interval '24 hours'`;
    assert.equal(new Date(body.allowed_at).getTime(), expected.getTime());
    assert.deepEqual(await snapshot(db.sql, "auto_publish_jobs"), before);
    // Four in the window: allowed.
    await db.sql`delete from auto_publish_jobs where id = (
    select id from auto_publish_jobs where finished_at > now() - interval '24 hours'
    order by finished_at limit 1)`;
    assert.equal((await call("POST", "/auto-publish/jobs", { edition_id: edition })).status, 201);
  },
);

dbTest(
  "recover() fails every Running job as interrupted, and those count toward the breaker",
  async (db) => {
    const { call } = hostApi(db);
    const edition = await insertEdition(db.sql);
    await insertFailures(db.sql, edition, 4, 1);
    await call("POST", "/auto-publish/jobs", { edition_id: edition });
    const claimed = (await (await call("POST", "/auto-publish/jobs/claim")).json()).jobs[0];
    const res = await call("POST", "/auto-publish/recover");
    assert.equal(res.status, 200);
    assert.deepEqual((await res.json()).recovered, [claimed.id]);
    const row = await jobRow(db, claimed.id);
    assert.deepEqual([row.status, row.error, row.claim_token], [
      "Failed",
      autoPublish.INTERRUPTED,
      null,
    ]);
    // A late settle from the dead run: 409, nothing changes.
    const late = await call("POST", `/auto-publish/jobs/${claimed.id}/complete`, {
      claim_token: claimed.claim_token,
    });
    assert.equal(late.status, 409);
    assert.equal((await jobRow(db, claimed.id)).status, "Failed");
    // Four failures plus the interrupted one: the breaker is open.
    assert.equal((await call("POST", "/auto-publish/jobs", { edition_id: edition })).status, 409);
  },
);

dbTest(
  "claim() takes one job by priority DESC, created_at, with a fresh token per claim",
  async (db) => {
    const { call } = hostApi(db);
    const [a, b, c] = [
      await insertEdition(db.sql),
      await insertEdition(db.sql),
      await insertEdition(db.sql),
    ];
    await call("POST", "/auto-publish/jobs", { edition_id: a, priority: 0 });
    await call("POST", "/auto-publish/jobs", { edition_id: b, priority: 5 });
    await call("POST", "/auto-publish/jobs", { edition_id: c, priority: 5 });
    const order: string[] = [];
    for (let i = 0; i < 3; i++) {
      const { jobs } = await (await call("POST", "/auto-publish/jobs/claim")).json();
      assert.equal(jobs.length, 1);
      assert.equal(jobs[0].edition.id, jobs[0].edition_id);
      order.push(jobs[0].edition_id);
    }
    assert.deepEqual(order, [b, c, a]);
    assert.deepEqual((await (await call("POST", "/auto-publish/jobs/claim", {})).json()).jobs, []);
    // Give back and claim again: a new token, the old one refused.
    const [first] = await db
      .sql`select id, claim_token from auto_publish_jobs where edition_id = ${b}`;
    const back = await call("POST", `/auto-publish/jobs/${first.id}/give-back`, {
      claim_token: first.claim_token,
    });
    assert.equal(back.status, 200);
    const again = (await (await call("POST", "/auto-publish/jobs/claim")).json()).jobs[0];
    assert.equal(again.id, first.id);
    assert.notEqual(again.claim_token, first.claim_token);
    assert.equal(again.attempt_count, 1, "the given-back attempt was not counted");
    const stale = await call("POST", `/auto-publish/jobs/${first.id}/fail`, {
      claim_token: first.claim_token,
      error: "late",
    });
    assert.equal(stale.status, 409);
    assert.equal((await jobRow(db, first.id)).status, "Running");
  },
);

dbTest(
  "complete() publishes, queues one Full rebuild, and records one IndexNow ping in the outbox",
  async (db) => {
    const { call, announced } = hostApi(db);
    const [e1, e2] = [await insertEdition(db.sql), await insertEdition(db.sql)];
    await call("POST", "/auto-publish/jobs", { edition_id: e1 });
    await call("POST", "/auto-publish/jobs", { edition_id: e2 });
    const j1 = (await (await call("POST", "/auto-publish/jobs/claim")).json()).jobs[0];
    const j2 = (await (await call("POST", "/auto-publish/jobs/claim")).json()).jobs[0];
    const res = await call("POST", `/auto-publish/jobs/${j1.id}/complete`, {
      claim_token: j1.claim_token,
      result: { output: "ok" },
    });
    assert.equal(res.status, 200);
    const done = await res.json();
    assert.equal(done.status, "Completed");
    assert.equal(done.result.output, "ok");
    assert.ok(done.result.published_at);
    const [edition] = await db.sql`select published_at from editions where id = ${j1.edition_id}`;
    assert.ok(edition.published_at);
    assert.deepEqual(await announced(), [j1.edition_id]);
    // The second complete reuses the queued rebuild (deduplicated).
    const res2 = await call("POST", `/auto-publish/jobs/${j2.id}/complete`, {
      claim_token: j2.claim_token,
    });
    assert.equal((await res2.json()).result.ssg_job_id, done.result.ssg_job_id);
    assert.equal((await db.sql`select count(*)::int as n from ssg_rebuild_jobs`)[0].n, 1);
    // A repeated complete (curl retry): the same answer, nothing changes, no second ping.
    const before = await snapshot(db.sql, "auto_publish_jobs");
    const repeat = await call("POST", `/auto-publish/jobs/${j1.id}/complete`, {
      claim_token: j1.claim_token,
      result: { output: "ok" },
    });
    assert.equal(repeat.status, 200);
    assert.deepEqual(await repeat.json(), done);
    assert.deepEqual(await snapshot(db.sql, "auto_publish_jobs"), before);
    assert.deepEqual(await announced(), [j1.edition_id, j2.edition_id]);
    // fail with that token after complete: 409.
    const failLate = await call("POST", `/auto-publish/jobs/${j1.id}/fail`, {
      claim_token: j1.claim_token,
      error: "x",
    });
    assert.equal(failLate.status, 409);
  },
);

dbTest("complete() during a Running Full rebuild queues a follow-up rebuild", async (db) => {
  const { call } = hostApi(db);
  const edition = await insertEdition(db.sql);
  await db.sql`insert into ssg_rebuild_jobs (status) values ('Running')`;
  await call("POST", "/auto-publish/jobs", { edition_id: edition });
  const job = (await (await call("POST", "/auto-publish/jobs/claim")).json()).jobs[0];
  await call("POST", `/auto-publish/jobs/${job.id}/complete`, { claim_token: job.claim_token });
  const rows = await db.sql`select status from ssg_rebuild_jobs order by id`;
  assert.deepEqual(rows.map((r) => r.status), ["Running", "Queued"]);
});

dbTest(
  "fail() stores the error; a repeat gives the same answer; retry brings it back",
  async (db) => {
    const { call } = hostApi(db);
    const edition = await insertEdition(db.sql);
    await call("POST", "/auto-publish/jobs", { edition_id: edition });
    const job = (await (await call("POST", "/auto-publish/jobs/claim")).json()).jobs[0];
    const body = { claim_token: job.claim_token, error: "PUBLISH_COMMAND exited 1: no disk" };
    const first = await call("POST", `/auto-publish/jobs/${job.id}/fail`, body);
    assert.equal(first.status, 200);
    const failed = await first.json();
    assert.equal(failed.error, body.error);
    const repeat = await call("POST", `/auto-publish/jobs/${job.id}/fail`, body);
    assert.equal(repeat.status, 200);
    assert.deepEqual(await repeat.json(), failed);
    // complete with the same token after the fail: 409.
    assert.equal(
      (await call("POST", `/auto-publish/jobs/${job.id}/complete`, {
        claim_token: job.claim_token,
      })).status,
      409,
    );
    const retried = await call("POST", `/auto-publish/jobs/${job.id}/retry`);
    assert.equal(retried.status, 200);
    const row = await retried.json();
    assert.deepEqual([row.status, row.attempt_count, row.error], ["Queued", 0, null]);
    assert.equal((await call("POST", `/auto-publish/jobs/${job.id}/retry`)).status, 409);
    assert.equal((await call("POST", "/auto-publish/jobs/424242/retry")).status, 404);
  },
);

dbTest(
  "each settle of an unknown id is a 404 JSON error; of a stale token a 409 naming the job's status; neither changes a row",
  async (db) => {
    const { call } = hostApi(db);
    await call("POST", "/auto-publish/jobs", { edition_id: await insertEdition(db.sql) });
    const [job] = (await (await call("POST", "/auto-publish/jobs/claim")).json()).jobs;
    const stale = crypto.randomUUID();
    const before = await snapshot(db.sql, "auto_publish_jobs");
    const bodies: Record<string, Record<string, unknown>> = {
      complete: { claim_token: stale },
      fail: { claim_token: stale, error: "boom" },
      "give-back": { claim_token: stale },
    };
    for (const [verb, body] of Object.entries(bodies)) {
      const absent = await call("POST", `/auto-publish/jobs/9223372036854775807/${verb}`, body);
      assert.equal(absent.status, 404, verb);
      assert.deepEqual(await absent.json(), { error: "No such job" }, verb);
      const lost = await call("POST", `/auto-publish/jobs/${job.id}/${verb}`, body);
      assert.equal(lost.status, 409, verb);
      const answer = await lost.json();
      assert.equal(answer.status, "Running", verb);
      assert.match(answer.error, /the claim_token no longer matches \(the job is Running/, verb);
    }
    assert.deepEqual(await snapshot(db.sql, "auto_publish_jobs"), before);
  },
);

dbTest(
  "POST /auto-publish/jobs/:id/cancel: a Queued job is Failed as cancelled and published once; a Running or finished one is a 409 naming its status",
  async (db) => {
    const { call, events } = hostApi(db);
    const seen: unknown[][] = [];
    events.observe((e) => void seen.push([e.id, e.transition, e.status, e.attempt, e.error]));
    const queued = await (await call("POST", "/auto-publish/jobs", {
      edition_id: await insertEdition(db.sql),
    })).json();
    const res = await call("POST", `/auto-publish/jobs/${queued.id}/cancel`);
    assert.equal(res.status, 200);
    assert.deepEqual([(await res.json()).status, (await jobRow(db, queued.id)).error], [
      "Failed",
      "cancelled by admin",
    ]);
    assert.deepEqual(seen, [[queued.id, "cancelled", "Failed", 0, "cancelled by admin"]]);
    // Cancelled (Failed) already: 409, nothing published, nothing changed.
    seen.length = 0;
    const again = await call("POST", `/auto-publish/jobs/${queued.id}/cancel`);
    assert.equal(again.status, 409);
    assert.deepEqual(await again.json(), {
      error: `Cannot cancel job ${queued.id}: it is Failed already`,
      status: "Failed",
    });
    // Running on the host: refused, the step may already have acted.
    await call("POST", "/auto-publish/jobs", { edition_id: await insertEdition(db.sql) });
    const [running] = (await (await call("POST", "/auto-publish/jobs/claim")).json()).jobs;
    const refused = await call("POST", `/auto-publish/jobs/${running.id}/cancel`);
    assert.equal(refused.status, 409);
    assert.equal((await refused.json()).status, "Running");
    assert.equal((await jobRow(db, running.id)).status, "Running");
    assert.deepEqual(seen.filter((e) => e[1] === "cancelled"), []);
    const absent = await call("POST", "/auto-publish/jobs/9223372036854775807/cancel");
    assert.equal(absent.status, 404);
  },
);

dbTest(
  "POST /auto-publish/jobs/retry refuses a body not declared JSON (415) and retries nothing; a query key it does not know is a 400 naming the query",
  async (db) => {
    const { call } = hostApi(db);
    await insertFailures(db.sql, await insertEdition(db.sql), 1, 1);
    const before = await snapshot(db.sql, "auto_publish_jobs");
    const res = await call("POST", "/auto-publish/jobs/retry", '{"status": "Failed"}', {
      authorization: `Bearer ${HOST_TOKEN}`,
      "content-type": "text/plain",
    });
    assert.equal(res.status, 415);
    assert.deepEqual(await res.json(), { error: "Expected Content-Type: application/json" });
    assert.deepEqual(await snapshot(db.sql, "auto_publish_jobs"), before);
    const bad = await call("GET", "/auto-publish/jobs?bogus=1");
    assert.equal(bad.status, 400);
    assert.match((await bad.json()).error, /^Invalid query: /);
  },
);

dbTest("GET /auto-publish/jobs lists by status, newest first, in pages", async (db) => {
  const { call } = hostApi(db);
  for (let i = 0; i < 3; i++) {
    await call("POST", "/auto-publish/jobs", { edition_id: await insertEdition(db.sql) });
  }
  const page1 = await (await call("GET", "/auto-publish/jobs?status=Queued&limit=2")).json();
  assert.equal(page1.jobs.length, 2);
  assert.ok(Number(page1.jobs[0].id) > Number(page1.jobs[1].id));
  const page2 =
    await (await call("GET", `/auto-publish/jobs?status=Queued&limit=2&before=${page1.next}`))
      .json();
  assert.equal(page2.jobs.length, 1);
  assert.equal(page2.next, null);
  assert.equal(
    (await (await call("GET", "/auto-publish/jobs?status=Failed")).json()).jobs.length,
    0,
  );
  const one = await call("GET", `/auto-publish/jobs/${page2.jobs[0].id}`);
  assert.equal((await one.json()).id, page2.jobs[0].id);
});

dbTest(
  "an ingestion that completes creates the edition's auto-publish job in its completing statement",
  async (db) => {
    const ctx = await ingestionContext(db);
    const withHook = {
      ...ctx,
      onEditionSaved: {
        statement: autoPublish.createOnIngest,
        report: (id: string, created: number) => autoPublish.reportOnIngest(ctx.log, id, created),
      },
    };
    await writeSource(ctx.storageDir, "book.txt", SMALL_BOOK);
    const id = await insertJob(db, "book.txt");
    const job = await ingestion.claim(withHook);
    assert.ok(job && job.id === id);
    await ingestion.run(withHook, job, new AbortController().signal);
    const [ing] = await db.sql`select status, edition_id from ingestion_jobs where id = ${id}`;
    assert.equal(ing.status, "Completed");
    const rows = await db.sql`select edition_id, status from auto_publish_jobs`;
    assert.deepEqual(rows.map((r) => [r.edition_id, r.status]), [[ing.edition_id, "Queued"]]);
    // Re-ingesting while that job is Queued: refused (one per edition), the ingestion still completes.
    const again = await db.sql<{ id: string }[]>`
    insert into ingestion_jobs (source_path, edition_id) values ('book.txt', ${ing.edition_id}) returning id`;
    const job2 = await ingestion.claim(withHook);
    await ingestion.run(withHook, job2!, new AbortController().signal);
    assert.equal(
      (await db.sql`select status from ingestion_jobs where id = ${again[0].id}`)[0].status,
      "Completed",
    );
    assert.equal((await db.sql`select count(*)::int as n from auto_publish_jobs`)[0].n, 1);
    // The breaker: five failures in the window, nothing in flight — refused too.
    await db.sql`update auto_publish_jobs set status = 'Failed', finished_at = now()`;
    await db.sql`
      insert into auto_publish_jobs (edition_id, status, finished_at)
      select ${ing.edition_id}, 'Failed', now() from generate_series(1, 4)`;
    await db
      .sql`insert into ingestion_jobs (source_path, edition_id) values ('book.txt', ${ing.edition_id})`;
    await ingestion.run(withHook, (await ingestion.claim(withHook))!, new AbortController().signal);
    assert.equal((await db.sql`select count(*)::int as n from auto_publish_jobs`)[0].n, 5);
    // Once one failure leaves the window, the next ingestion creates the job.
    await db.sql`
      update auto_publish_jobs set finished_at = now() - interval '25 hours'
      where id = (select min(id) from auto_publish_jobs)`;
    await db
      .sql`insert into ingestion_jobs (source_path, edition_id) values ('book.txt', ${ing.edition_id})`;
    await ingestion.run(withHook, (await ingestion.claim(withHook))!, new AbortController().signal);
    const queued = await db.sql`select edition_id from auto_publish_jobs where status = 'Queued'`;
    assert.deepEqual(queued.map((r) => r.edition_id), [ing.edition_id]);
  },
);

dbTest("a job created inside a rolled-back ingestion transaction does not exist", async (db) => {
  const edition = await insertEdition(db.sql);
  await assert.rejects(
    db.sql.begin(async (tx) => {
      assert.equal((await autoPublishJobs.enqueue(tx, edition, 0)).outcome, "created");
      throw new Error("rollback");
    }),
    /rollback/,
  );
  assert.equal((await db.sql`select count(*)::int as n from auto_publish_jobs`)[0].n, 0);
});

dbTest(
  "parseSettings() reads AUTO_PUBLISH_ON_INGEST and the IndexNow settings, naming a bad one",
  () => {
    assert.equal(autoPublish.parseSettings({}).onIngest, true);
    assert.equal(autoPublish.parseSettings({}).indexNow, null);
    assert.equal(autoPublish.parseSettings({ AUTO_PUBLISH_ON_INGEST: "0" }).onIngest, false);
    assert.throws(
      () => autoPublish.parseSettings({ AUTO_PUBLISH_ON_INGEST: "maybe" }),
      /AUTO_PUBLISH_ON_INGEST/,
    );
    assert.throws(
      () => autoPublish.parseSettings({ INDEXNOW_URL: "https://x.example/i" }),
      /SITE_URL/,
    );
    assert.throws(
      () =>
        autoPublish.parseSettings({
          INDEXNOW_URL: "https://x.example/i",
          SITE_URL: "https://s.example",
        }),
      /INDEXNOW_KEY/,
    );
    const s = autoPublish.parseSettings({
      INDEXNOW_URL: "https://x.example/i",
      SITE_URL: "https://s.example/",
      INDEXNOW_KEY: "abcdef123456",
    });
    assert.deepEqual(s.indexNow, {
      url: "https://x.example/i",
      siteUrl: "https://s.example",
      key: "abcdef123456",
    });
    return Promise.resolve();
  },
);

dbTest(
  "a repeated claim key returns the same job and token; a settled key claims nothing",
  async (db) => {
    const { call } = hostApi(db);
    const claim = async (body?: unknown) =>
      (await (await call("POST", "/auto-publish/jobs/claim", body)).json()).jobs;
    // An empty queue: the key claims nothing, and stays free to claim later.
    const key = crypto.randomUUID();
    assert.deepEqual(await claim({ claim_key: key }), []);
    for (let i = 0; i < 3; i++) {
      await call("POST", "/auto-publish/jobs", { edition_id: await insertEdition(db.sql) });
    }
    // The first claim and two repeats race; all three answer the same job and token.
    const answers = await Promise.all([1, 2, 3].map(() => claim({ claim_key: key })));
    assert.equal(answers[0].length, 1);
    const [job] = answers[0];
    for (const again of answers.slice(1)) {
      assert.deepEqual(
        again.map((j: { id: string; claim_token: string }) => [j.id, j.claim_token]),
        [
          [job.id, job.claim_token],
        ],
      );
    }
    assert.equal(job.attempt_count, 1);
    const running = await db
      .sql`select id, attempt_count from auto_publish_jobs where status = 'Running'`;
    assert.deepEqual(running.map((r) => [r.id, r.attempt_count]), [[job.id, 1]]);
    // Without a key, a claim takes the next job, as before.
    const [other] = await claim();
    assert.notEqual(other.id, job.id);
    // Settled (completed): the key claims nothing more, though a job is still Queued.
    const done = await call("POST", `/auto-publish/jobs/${job.id}/complete`, {
      claim_token: job.claim_token,
    });
    assert.equal(done.status, 200);
    assert.deepEqual(await claim({ claim_key: key }), []);
    assert.equal((await claim({ claim_key: crypto.randomUUID() })).length, 1);
    // The startup recover is unchanged: it fails a keyed job like any other.
    const k2 = crypto.randomUUID();
    await call("POST", "/auto-publish/jobs", { edition_id: await insertEdition(db.sql) });
    const [keyed] = await claim({ claim_key: k2 });
    const recovered = await (await call("POST", "/auto-publish/recover")).json();
    assert.ok(recovered.recovered.includes(keyed.id));
    assert.deepEqual(await claim({ claim_key: k2 }), []);
    const bad = await call("POST", "/auto-publish/jobs/claim", { claim_key: 5 });
    assert.equal(bad.status, 400);
  },
);

dbTest(
  "claims with one key racing a slow claim take one job: the later ones wait on the key's lock and answer the first one's job and token",
  async (db) => {
    const { call } = hostApi(db);
    const claim = async (body: unknown) =>
      (await (await call("POST", "/auto-publish/jobs/claim", body)).json()).jobs;
    for (let i = 0; i < 4; i++) {
      await call("POST", "/auto-publish/jobs", { edition_id: await insertEdition(db.sql) });
    }
    // A slow claiming write (a loaded disk): each claim holds its transaction open 300 ms after
    // taking its row, so the racing claims surely overlap it.
    await db.sql.unsafe(`
      create function slow_claim() returns trigger language plpgsql as $$
      begin
        if new.status = 'Running' and old.status = 'Queued' then perform pg_sleep(0.3); end if;
        return new;
      end $$;
      create trigger slow_claim before update on auto_publish_jobs
        for each row execute function slow_claim();`);
    for (const racers of [2, 3]) {
      const key = crypto.randomUUID();
      const first = claim({ claim_key: key });
      await new Promise((r) => setTimeout(r, 50)); // the first claim is inside its write
      const answers = await Promise.all([
        first,
        ...Array.from({ length: racers - 1 }, () => claim({ claim_key: key })),
      ]);
      const shapes = answers.map((jobs: { id: string; claim_token: string }[]) =>
        jobs.map((j) => [j.id, j.claim_token])
      );
      assert.equal(shapes[0].length, 1, `${racers} racers`);
      for (const again of shapes.slice(1)) assert.deepEqual(again, shapes[0], `${racers} racers`);
      const [{ n }] = await db.sql<{ n: number }[]>`
        select count(*)::int as n from auto_publish_jobs where claim_key = ${key}`;
      assert.equal(n, 1, `one job carries the key (${racers} racers)`);
    }
    const [{ running }] = await db.sql<{ running: number }[]>`
      select count(*)::int as running from auto_publish_jobs where status = 'Running'`;
    assert.equal(running, 2, "one job per key");
  },
);
