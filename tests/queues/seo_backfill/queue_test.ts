import assert from "node:assert/strict";
import { dbTest, waitFor } from "../../_db.ts";
import { HOST_TOKEN, hostApi, insertEdition, snapshot } from "../../_host.ts";
import { seoView } from "../../../queues/seo_backfill/view.ts";
import { ingestionView } from "../../../queues/ingestion/view.ts";

const FIELDS = {
  meta_title: "The Test Book by Ada Tester",
  meta_description: "It was a bright cold day.",
  meta_keywords: ["test", "book"],
};

async function seoOf(sql: import("../../../lib/db.ts").Sql, edition: string) {
  const [row] = await sql`
    select meta_title, meta_description, meta_keywords from editions where id = ${edition}`;
  return { ...row };
}

dbTest(
  "claim() takes up to limit jobs oldest first, each with its own token and its edition",
  async (db) => {
    const { call } = hostApi(db);
    const editions = [];
    for (let i = 0; i < 3; i++) editions.push(await insertEdition(db.sql, `Book ${i}`));
    const ids = [];
    for (const e of editions) {
      ids.push(
        (await (await call("POST", "/seo/jobs", { edition_id: e })).json()).id,
      );
    }
    const { jobs } = await (await call("POST", "/seo/jobs/claim", { limit: 2 })).json();
    assert.deepEqual(jobs.map((j: { id: string }) => j.id), ids.slice(0, 2));
    assert.notEqual(jobs[0].claim_token, jobs[1].claim_token);
    assert.equal(jobs[0].edition.title, "Book 0");
    assert.match(jobs[0].edition.excerpt, /^It was a bright cold day\.$/);
    assert.deepEqual(jobs.map((j: { status: string }) => j.status), ["Running", "Running"]);
    const rest = await (await call("POST", "/seo/jobs/claim", { limit: "50" })).json();
    assert.deepEqual(rest.jobs.map((j: { id: string }) => j.id), [ids[2]]);
    assert.deepEqual((await (await call("POST", "/seo/jobs/claim")).json()).jobs, []);
  },
);

dbTest(
  "claim() reads an empty body as {} whether or not it is declared JSON; a text body is 415",
  async (db) => {
    const { call } = hostApi(db);
    const auth = { authorization: `Bearer ${HOST_TOKEN}` };
    for (let i = 0; i < 2; i++) {
      await call("POST", "/seo/jobs", { edition_id: await insertEdition(db.sql, `Book ${i}`) });
    }
    const text = await call("POST", "/seo/jobs/claim", "limit=5", {
      ...auth,
      "content-type": "text/plain",
    });
    assert.equal(text.status, 415);
    assert.deepEqual(await text.json(), { error: "Expected Content-Type: application/json" });
    for (const type of ["application/json", undefined]) {
      const headers = type === undefined ? auth : { ...auth, "content-type": type };
      const res = await call("POST", "/seo/jobs/claim", "", headers);
      assert.equal(res.status, 200, `${type}: ${await res.clone().text()}`);
      assert.equal((await res.json()).jobs.length, 1, `${type}: the default limit is 1`);
    }
  },
);

dbTest(
  "the sweep before each claim fails Running jobs older than staleAfterMs; a late complete is 409",
  async (db) => {
    const { call } = hostApi(db, { staleAfterMs: 300 });
    const edition = await insertEdition(db.sql);
    await call("POST", "/seo/jobs", { edition_id: edition });
    const [job] = (await (await call("POST", "/seo/jobs/claim")).json()).jobs;
    // Not stale yet: a claim leaves it Running.
    await call("POST", "/seo/jobs/claim");
    assert.equal((await db.sql`select status from seo_backfill_jobs`)[0].status, "Running");
    await waitFor("the job to be older than 300 ms", async () => {
      const [r] = await db
        .sql`select claimed_at < now() - interval '300 ms' as old from seo_backfill_jobs`;
      return r.old;
    });
    await call("POST", "/seo/jobs/claim");
    const [row] = await db.sql`select status, error, claim_token from seo_backfill_jobs`;
    assert.deepEqual([row.status, row.claim_token], ["Failed", null]);
    assert.match(row.error, /^interrupted \(Running longer than 300 ms\)$/);
    const before = await seoOf(db.sql, edition);
    const late = await call("POST", `/seo/jobs/${job.id}/complete`, {
      claim_token: job.claim_token,
      result: FIELDS,
    });
    assert.equal(late.status, 409);
    assert.match((await late.json()).error, /no longer matches/);
    assert.deepEqual(await seoOf(db.sql, edition), before);
    const lateFail = await call("POST", `/seo/jobs/${job.id}/fail`, {
      claim_token: job.claim_token,
      error: "x",
    });
    assert.equal(lateFail.status, 409);
    assert.match((await db.sql`select error from seo_backfill_jobs`)[0].error, /^interrupted/);
  },
);

dbTest(
  "the crew path inserts its job Running with a token; no poller claim can take it",
  async (db) => {
    const { call } = hostApi(db);
    const edition = await insertEdition(db.sql);
    const res = await call("POST", "/seo/jobs/crew", { edition_id: edition });
    assert.equal(res.status, 201);
    const job = await res.json();
    assert.deepEqual([job.status, job.claimed_via, job.attempt_count], ["Running", "crew", 1]);
    assert.match(job.claim_token, /^[0-9a-f-]{36}$/);
    assert.equal(job.edition.id, edition);
    assert.deepEqual(
      (await (await call("POST", "/seo/jobs/claim", { limit: 50 })).json()).jobs,
      [],
    );
    const done = await call("POST", `/seo/jobs/${job.id}/complete`, {
      claim_token: job.claim_token,
      result: FIELDS,
    });
    assert.equal(done.status, 200);
    assert.deepEqual(await seoOf(db.sql, edition), FIELDS);
    assert.equal((await call("POST", "/seo/jobs/crew", { edition_id: "987654" })).status, 404);
  },
);

dbTest("complete() snapshots the original fields once; revert restores them", async (db) => {
  const { call } = hostApi(db);
  const edition = await insertEdition(db.sql);
  await db
    .sql`update editions set meta_title = 'Original', meta_keywords = '{orig}' where id = ${edition}`;
  const original = await seoOf(db.sql, edition);
  const run = async (fields: typeof FIELDS) => {
    const job = await (await call("POST", "/seo/jobs/crew", { edition_id: edition })).json();
    const res = await call("POST", `/seo/jobs/${job.id}/complete`, {
      claim_token: job.claim_token,
      result: fields,
    });
    assert.equal(res.status, 200);
    return { job, answer: await res.json() };
  };
  const first = await run(FIELDS);
  await run({ ...FIELDS, meta_title: "Second run" });
  assert.equal((await seoOf(db.sql, edition)).meta_title, "Second run");
  const [snap] = await db
    .sql`select meta_title, meta_keywords from seo_before_snapshots where edition_id = ${edition}`;
  assert.deepEqual([snap.meta_title, snap.meta_keywords], ["Original", ["orig"]]);
  // A repeated complete of the first run: the same answer; the fields stay the second run's.
  const repeat = await call("POST", `/seo/jobs/${first.job.id}/complete`, {
    claim_token: first.job.claim_token,
    result: FIELDS,
  });
  assert.equal(repeat.status, 200);
  assert.deepEqual(await repeat.json(), first.answer);
  assert.equal((await seoOf(db.sql, edition)).meta_title, "Second run");

  const reverted = await call("POST", `/seo/editions/${edition}/revert`);
  assert.equal(reverted.status, 200);
  assert.deepEqual(await seoOf(db.sql, edition), original);
  const before = await snapshot(db.sql, "editions");
  assert.equal((await call("POST", `/seo/editions/${edition}/revert`)).status, 409);
  assert.deepEqual(await snapshot(db.sql, "editions"), before);
  assert.equal((await call("POST", "/seo/editions/555555/revert")).status, 404);
});

dbTest(
  "each settle publishes its own transition once, after its write: claimed (with its wait), completed, failed, given_back",
  async (db) => {
    const { call, events } = hostApi(db);
    const seen: { id: string; transition: string; status: string; runnableForS?: number | null }[] =
      [];
    events.observe((e) => void seen.push(e));
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const edition = await insertEdition(db.sql);
      ids.push((await (await call("POST", "/seo/jobs", { edition_id: edition })).json()).id);
    }
    const claimed = (await (await call("POST", "/seo/jobs/claim", { limit: 3 })).json()).jobs;
    assert.equal(claimed.length, 3);
    const claims = seen.filter((e) => e.transition === "claimed");
    assert.equal(claims.length, 3);
    for (const e of claims) {
      assert.ok(typeof e.runnableForS === "number" && e.runnableForS >= 0, `${e.runnableForS}`);
    }
    const [a, b, c] = claimed;
    seen.length = 0;
    await call("POST", `/seo/jobs/${a.id}/complete`, {
      claim_token: a.claim_token,
      result: FIELDS,
    });
    await call("POST", `/seo/jobs/${b.id}/fail`, { claim_token: b.claim_token, error: "bad" });
    await call("POST", `/seo/jobs/${c.id}/give-back`, { claim_token: c.claim_token });
    assert.deepEqual(seen.map((e) => [e.id, e.transition, e.status]), [
      [a.id, "completed", "Completed"],
      [b.id, "failed", "Failed"],
      [c.id, "given_back", "Queued"],
    ]);
  },
);

dbTest(
  "POST /seo/jobs/retry: a dry run counts and changes and publishes nothing; the retry re-queues and publishes one retried event per job",
  async (db) => {
    const { call, events } = hostApi(db);
    const seen: unknown[][] = [];
    events.observe((e) => void seen.push([e.id, e.transition, e.status, e.attempt]));
    const ids: string[] = [];
    for (let i = 0; i < 2; i++) {
      const [row] = await db.sql<{ id: string }[]>`
        insert into seo_backfill_jobs (edition_id, status, attempt_count, error, finished_at)
        values (${await insertEdition(db.sql)}, 'Failed', 3, 'boom', now()) returning id`;
      ids.push(row.id);
    }
    const before = await snapshot(db.sql, "seo_backfill_jobs");
    const dry = await call("POST", "/seo/jobs/retry", { status: "Failed", dry_run: true });
    assert.equal(dry.status, 200);
    const counted = await dry.json();
    assert.deepEqual(
      [counted.matched, counted.retried, counted.skipped, counted.dry_run, counted.ids],
      [2, 0, 0, true, []],
    );
    assert.deepEqual(await snapshot(db.sql, "seo_backfill_jobs"), before);
    assert.deepEqual(seen, []);
    const res = await call("POST", "/seo/jobs/retry", { status: "Failed" });
    const retried = await res.json();
    assert.deepEqual([retried.matched, retried.retried, retried.skipped, retried.dry_run], [
      2,
      2,
      0,
      false,
    ]);
    assert.deepEqual(
      seen.sort(),
      ids.map((id) => [id, "retried", "Queued", 0]).sort(),
    );
    const rows = await db.sql`select status, attempt_count from seo_backfill_jobs order by id`;
    assert.deepEqual(rows.map((r) => [r.status, r.attempt_count]), [["Queued", 0], ["Queued", 0]]);
  },
);

dbTest(
  "the admin view: stats count every status in lifecycle order (0 where none); a job's details show its result fields, non-strings as JSON; an edition's chapters as position, title, bytes",
  async (db) => {
    const { call } = hostApi(db);
    const edition = await insertEdition(db.sql);
    await call("POST", "/seo/jobs", { edition_id: edition });
    await call("POST", "/seo/jobs", { edition_id: await insertEdition(db.sql) });
    const stats = await seoView.stats(db.sql);
    assert.deepEqual(Object.entries(stats.byStatus), [
      ["Queued", 2],
      ["Running", 0],
      ["Completed", 0],
      ["Failed", 0],
    ]);
    assert.ok(typeof stats.oldestRunnableAgeS === "number" && stats.oldestRunnableAgeS >= 0);
    const [job] = (await (await call("POST", "/seo/jobs/claim")).json()).jobs;
    await call("POST", `/seo/jobs/${job.id}/complete`, {
      claim_token: job.claim_token,
      result: FIELDS,
    });
    const row = await seoView.getJob(db.sql, job.id);
    assert.ok(row);
    const [fields] = await seoView.details!(db.sql, row);
    // (jsonb keeps its own key order.)
    assert.deepEqual([...fields.rows].sort(), [
      ["meta_description", FIELDS.meta_description],
      ["meta_keywords", '["test","book"]'],
      ["meta_title", FIELDS.meta_title],
    ]);
    const [chapters] = await ingestionView.details!(db.sql, { edition_id: edition });
    assert.deepEqual(chapters.columns, ["#", "Chapter", "HTML bytes"]);
    const bytes = new TextEncoder().encode("<p>It was a bright <em>cold</em> day.</p>").length;
    assert.deepEqual(chapters.rows, [[1, "Chapter I", bytes]]);
  },
);

dbTest("give-back returns a claimed job to Queued without counting the attempt", async (db) => {
  const { call } = hostApi(db);
  const edition = await insertEdition(db.sql);
  await call("POST", "/seo/jobs", { edition_id: edition });
  const [job] = (await (await call("POST", "/seo/jobs/claim")).json()).jobs;
  const res = await call("POST", `/seo/jobs/${job.id}/give-back`, { claim_token: job.claim_token });
  assert.equal(res.status, 200);
  const row = await res.json();
  assert.deepEqual([row.status, row.attempt_count, row.error], ["Queued", 0, null]);
  const repeat = await call("POST", `/seo/jobs/${job.id}/give-back`, {
    claim_token: job.claim_token,
  });
  assert.equal(repeat.status, 200);
  // After a fail, the admin retry; then the old token is refused.
  const [again] = (await (await call("POST", "/seo/jobs/claim")).json()).jobs;
  await call("POST", `/seo/jobs/${again.id}/fail`, {
    claim_token: again.claim_token,
    error: "bad",
  });
  assert.equal((await call("POST", `/seo/jobs/${again.id}/retry`)).status, 200);
  const late = await call("POST", `/seo/jobs/${again.id}/fail`, {
    claim_token: again.claim_token,
    error: "bad",
  });
  assert.equal(late.status, 409);
  assert.equal((await db.sql`select status from seo_backfill_jobs`)[0].status, "Queued");
});

dbTest(
  "a repeated claim key returns the same jobs and tokens, claims nothing new, and never a crew job",
  async (db) => {
    const { call } = hostApi(db);
    // Property over batch sizes and how many jobs are queued: a first claim with a key takes
    // min(limit, queued); every repeat (any limit, in parallel too) answers exactly those jobs.
    for (const [queued, limit] of [[0, 3], [2, 5], [5, 3], [4, 1]]) {
      await db.sql`delete from seo_backfill_jobs`;
      const crew = await (await call("POST", "/seo/jobs/crew", {
        edition_id: await insertEdition(db.sql, "Crew"),
      })).json();
      for (let i = 0; i < queued; i++) {
        await call("POST", "/seo/jobs", { edition_id: await insertEdition(db.sql, `B${i}`) });
      }
      const key = crypto.randomUUID();
      const claimOnce = async (n: number) =>
        (await (await call("POST", "/seo/jobs/claim", { limit: n, claim_key: key })).json()).jobs;
      // The first claim and two repeats race: the key's lock makes the repeats wait for it.
      const answers = await Promise.all([claimOnce(limit), claimOnce(limit), claimOnce(limit)]);
      const first = answers[0];
      const shape = (jobs: Array<Record<string, unknown>>) =>
        jobs.map((j) => [j.id, j.claim_token, j.attempt_count, j.status]);
      assert.equal(first.length, Math.min(limit, queued), `queued ${queued}, limit ${limit}`);
      for (const again of [...answers.slice(1), await claimOnce(1), await claimOnce(50)]) {
        assert.deepEqual(shape(again), shape(first));
      }
      const rows = await db.sql`
        select id, status, attempt_count from seo_backfill_jobs where claimed_via = 'poller'`;
      assert.equal(rows.length, first.length);
      assert.ok(rows.every((r) => r.status === "Running" && r.attempt_count === 1));
      assert.ok(!first.some((j: { id: string }) => j.id === crew.id), "never the crew job");
      const [c] = await db
        .sql`select status, claim_key from seo_backfill_jobs where id = ${crew.id}`;
      assert.deepEqual([c.status, c.claim_key], ["Running", null]);
      // A new key (or none) claims what is left, as today.
      const rest = (await (await call("POST", "/seo/jobs/claim", { limit: 50 })).json()).jobs;
      assert.equal(rest.length, queued - first.length);
    }
  },
);

dbTest(
  "the sweep runs before a keyed claim; a key whose jobs are all settled claims nothing",
  async (db) => {
    const { call } = hostApi(db, { staleAfterMs: 60_000 });
    for (let i = 0; i < 3; i++) {
      await call("POST", "/seo/jobs", { edition_id: await insertEdition(db.sql, `B${i}`) });
    }
    const key = crypto.randomUUID();
    const claim = async (k: string) =>
      (await (await call("POST", "/seo/jobs/claim", { limit: 2, claim_key: k })).json()).jobs;
    const first = await claim(key);
    assert.equal(first.length, 2);
    // One of the key's jobs goes stale: the repeat's sweep fails it first, and the repeat returns
    // only the one still Running.
    await db.sql`
      update seo_backfill_jobs set claimed_at = now() - interval '2 minutes' where id = ${
      first[0].id
    }`;
    const again = await claim(key);
    assert.deepEqual(again.map((j: { id: string }) => j.id), [first[1].id]);
    const [swept] = await db.sql`select status, error from seo_backfill_jobs where id = ${
      first[0].id
    }`;
    assert.equal(swept.status, "Failed");
    assert.match(swept.error, /^interrupted/);
    // The other is given back: the key has no Running job left and claims nothing, although a
    // job is Queued.
    const res = await call("POST", `/seo/jobs/${first[1].id}/give-back`, {
      claim_token: first[1].claim_token,
    });
    assert.equal(res.status, 200);
    assert.deepEqual(await claim(key), []);
    assert.equal((await claim(crypto.randomUUID())).length, 2);
    const bad = await call("POST", "/seo/jobs/claim", { claim_key: "not-a-uuid" });
    assert.equal(bad.status, 400);
    assert.match((await bad.json()).error, /Invalid claim_key/);
  },
);

dbTest("POST /seo/jobs/give-back gives a batch back in one request, each fenced", async (db) => {
  const { call } = hostApi(db);
  for (let i = 0; i < 4; i++) {
    await call("POST", "/seo/jobs", { edition_id: await insertEdition(db.sql, `B${i}`) });
  }
  const jobs = (await (await call("POST", "/seo/jobs/claim", { limit: 4 })).json()).jobs;
  // The last one is completed first: its give-back is refused (409-like "lost").
  await call("POST", `/seo/jobs/${jobs[3].id}/complete`, {
    claim_token: jobs[3].claim_token,
    result: FIELDS,
  });
  const body = {
    jobs: [
      ...jobs.map((j: { id: string; claim_token: string }) => ({
        id: j.id,
        claim_token: j.claim_token,
      })),
      { id: "987654", claim_token: jobs[0].claim_token },
    ],
  };
  const res = await call("POST", "/seo/jobs/give-back", body);
  assert.equal(res.status, 200);
  const outcomes = (await res.json()).jobs.map((o: Record<string, unknown>) => [
    o.id,
    o.outcome,
    o.status,
  ]);
  assert.deepEqual(outcomes, [
    [jobs[0].id, "settled", "Queued"],
    [jobs[1].id, "settled", "Queued"],
    [jobs[2].id, "settled", "Queued"],
    [jobs[3].id, "lost", "Completed"],
    ["987654", "absent", null],
  ]);
  const rows = await db.sql`select status, attempt_count from seo_backfill_jobs order by id`;
  assert.deepEqual(rows.map((r) => [r.status, r.attempt_count]), [
    ["Queued", 0],
    ["Queued", 0],
    ["Queued", 0],
    ["Completed", 1],
  ]);
  // A repeat answers "repeated" and changes nothing.
  const repeat = await (await call("POST", "/seo/jobs/give-back", { jobs: body.jobs.slice(0, 1) }))
    .json();
  assert.deepEqual(repeat.jobs[0].outcome, "repeated");
  assert.equal((await call("POST", "/seo/jobs/give-back", { jobs: [] })).status, 400);
  const dup = await call("POST", "/seo/jobs/give-back", { jobs: [body.jobs[0], body.jobs[0]] });
  assert.equal(dup.status, 400);
});
