/**
 * The claim API against a spawned worker, with real curl: the bad-request matrix of the claim API's
 * "Done when" (only 4xx, nothing changes), 405 with `Allow`, 503 for an unreachable database, and
 * the IndexNow ping after a complete's commit.
 */
import assert from "node:assert/strict";
import { dbTest, waitFor } from "../_db.ts";
import { spawnWorker, TEST_TOKEN } from "../_worker.ts";
import { freePort } from "../_fs.ts";
import { hostApi, insertEdition, listening, snapshot } from "../_host.ts";
import { connect } from "../../lib/db.ts";

/** These tests need curl (tests/_requires.ts: ignored where missing, outside CI). */
const REQUIRES = { requires: ["curl"] } as const;

const TABLES = [
  "auto_publish_jobs",
  "seo_backfill_jobs",
  "editions",
  "seo_before_snapshots",
  "ssg_rebuild_jobs",
];

/** Run curl; returns the status and headers/body text. */
async function curl(args: string[]): Promise<{ status: number; text: string }> {
  const out = await new Deno.Command("curl", {
    args: ["-sS", "-i", "--max-time", "20", ...args],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(out.stdout);
  // The last status line: a large upload first gets "100 Continue".
  const statuses = [...text.matchAll(/^HTTP\/[\d.]+ (\d{3})/gm)].map((m) => Number(m[1]));
  const status = statuses.filter((s) => s !== 100).at(-1) ?? 0;
  return { status, text };
}

dbTest("a curl matrix of bad requests gets only 4xx answers and changes nothing", async (db) => {
  const worker = spawnWorker(db, {});
  try {
    const url = await listening(worker);
    const edition = await insertEdition(db.sql);
    // One job of each queue in flight, so bad settles have something to hit.
    await db.sql`insert into auto_publish_jobs (edition_id) values (${edition})`;
    await db.sql`insert into seo_backfill_jobs (edition_id) values (${edition})`;
    const claim = await curl([
      "-X",
      "POST",
      "-H",
      `Authorization: Bearer ${TEST_TOKEN}`,
      `${url}/internal/auto-publish/jobs/claim`,
    ]);
    assert.equal(claim.status, 200);
    const apId = /"id":"(\d+)"/.exec(claim.text)![1];
    const seo = await curl([
      "-X",
      "POST",
      "-H",
      `Authorization: Bearer ${TEST_TOKEN}`,
      "-H",
      "Content-Type: application/json",
      "-d",
      '{"limit":1}',
      `${url}/internal/seo/jobs/claim`,
    ]);
    const seoId = /"id":"(\d+)"/.exec(seo.text)![1];
    const before = await Promise.all(TABLES.map((t) => snapshot(db.sql, t)));

    const big = await Deno.makeTempFile();
    await Deno.writeFile(big, new Uint8Array(10 * 1024 * 1024).fill(0x20));
    const auth = ["-H", `Authorization: Bearer ${TEST_TOKEN}`];
    const json = [...auth, "-H", "Content-Type: application/json"];
    const token = "00000000-0000-4000-8000-000000000000";
    const cases: Array<[string, string[], number]> = [
      [
        "truncated JSON",
        [...json, "-d", '{"edition_id": 1', `${url}/internal/auto-publish/jobs`],
        400,
      ],
      [
        "wrong type",
        [...json, "-d", '{"edition_id": true}', `${url}/internal/auto-publish/jobs`],
        400,
      ],
      ["wrong priority type", [
        ...json,
        "-d",
        `{"edition_id": ${edition}, "priority": "high"}`,
        `${url}/internal/auto-publish/jobs`,
      ], 400],
      ["unknown field", [
        ...json,
        "-d",
        `{"edition_id": ${edition}, "x": 1}`,
        `${url}/internal/seo/jobs`,
      ], 400],
      ["empty body", [...json, "-X", "POST", `${url}/internal/auto-publish/jobs`], 400],
      ["empty JSON body on a settle", [
        ...json,
        "-d",
        "{}",
        `${url}/internal/auto-publish/jobs/${apId}/complete`,
      ], 400],
      ["10 MB body", [...json, "--data-binary", `@${big}`, `${url}/internal/seo/jobs/claim`], 413],
      ["negative limit", [...json, "-d", '{"limit": -1}', `${url}/internal/seo/jobs/claim`], 400],
      ["zero limit", [...json, "-d", '{"limit": 0}', `${url}/internal/seo/jobs/claim`], 400],
      ["huge limit", [...json, "-d", '{"limit": 1e300}', `${url}/internal/seo/jobs/claim`], 400],
      ["limit 51", [...json, "-d", '{"limit": "51"}', `${url}/internal/seo/jobs/claim`], 400],
      ["text claim body", [
        ...auth,
        "-H",
        "Content-Type: text/plain",
        "-d",
        "limit=5",
        `${url}/internal/seo/jobs/claim`,
      ], 415],
      ["non-numeric id", [
        ...json,
        "-d",
        `{"claim_token": "${token}"}`,
        `${url}/internal/auto-publish/jobs/abc/give-back`,
      ], 404],
      ["id past bigint", [
        ...json,
        "-d",
        `{"claim_token": "${token}"}`,
        `${url}/internal/seo/jobs/9223372036854775808/give-back`,
      ], 400],
      ["body id past bigint", [
        ...json,
        "-d",
        '{"edition_id": "99999999999999999999"}',
        `${url}/internal/seo/jobs/crew`,
      ], 400],
      ["unsafe JSON number id", [
        ...json,
        "-d",
        '{"edition_id": 9223372036854775807}',
        `${url}/internal/seo/jobs`,
      ], 400],
      ["zero id", [...auth, `${url}/internal/auto-publish/jobs/0`], 400],
      ["absent id", [...auth, `${url}/internal/auto-publish/jobs/9223372036854775807`], 404],
      ["absent edition", [
        ...json,
        "-d",
        '{"edition_id": "9223372036854775807"}',
        `${url}/internal/auto-publish/jobs`,
      ], 404],
      ["malformed token", [
        ...json,
        "-d",
        '{"claim_token": "nope"}',
        `${url}/internal/auto-publish/jobs/${apId}/complete`,
      ], 400],
      ["wrong token", [
        ...json,
        "-d",
        `{"claim_token": "${token}"}`,
        `${url}/internal/auto-publish/jobs/${apId}/complete`,
      ], 409],
      ["wrong token on fail", [
        ...json,
        "-d",
        `{"claim_token": "${token}", "error": "x"}`,
        `${url}/internal/seo/jobs/${seoId}/fail`,
      ], 409],
      ["error over 8000 characters", [
        ...json,
        "-d",
        `{"claim_token": "${token}", "error": "${"x".repeat(8001)}"}`,
        `${url}/internal/seo/jobs/${seoId}/fail`,
      ], 400],
      ["text body on a settle", [
        ...auth,
        "-H",
        "Content-Type: text/plain",
        "-d",
        `{"claim_token": "${token}"}`,
        `${url}/internal/auto-publish/jobs/${apId}/complete`,
      ], 415],
      ["NUL in error", [
        ...json,
        "-d",
        `{"claim_token": "${token}", "error": "a\\u0000b"}`,
        `${url}/internal/seo/jobs/${seoId}/fail`,
      ], 400],
      ["bad SEO result", [
        ...json,
        "-d",
        `{"claim_token": "${token}", "result": {"meta_title": 5}}`,
        `${url}/internal/seo/jobs/${seoId}/complete`,
      ], 400],
      ["bad list status", [...auth, `${url}/internal/seo/jobs?status=Done`], 400],
      ["bad list limit", [...auth, `${url}/internal/auto-publish/jobs?limit=-3`], 400],
      ["missing token", ["-X", "POST", `${url}/internal/auto-publish/jobs/claim`], 401],
      ["wrong bearer token", [
        "-X",
        "POST",
        "-H",
        "Authorization: Bearer wrong-token-0000000000",
        `${url}/internal/seo/jobs/claim`,
      ], 401],
      ["GET claim", [...auth, `${url}/internal/auto-publish/jobs/claim`], 405],
      ["GET crew", [...auth, `${url}/internal/seo/jobs/crew`], 405],
      ["GET recover", [...auth, `${url}/internal/auto-publish/recover`], 405],
      ["DELETE a job", [...auth, "-X", "DELETE", `${url}/internal/seo/jobs/${seoId}`], 405],
      ["PUT complete", [
        ...json,
        "-X",
        "PUT",
        "-d",
        "{}",
        `${url}/internal/seo/jobs/${seoId}/complete`,
      ], 405],
      [
        "retry of a Running job",
        [...auth, "-X", "POST", `${url}/internal/seo/jobs/${seoId}/retry`],
        409,
      ],
      ["revert without snapshot", [
        ...auth,
        "-X",
        "POST",
        `${url}/internal/seo/editions/${edition}/revert`,
      ], 409],
    ];
    for (const [what, args, expected] of cases) {
      const res = await curl(args);
      assert.equal(res.status, expected, `${what}: ${res.text.slice(0, 400)}`);
      if (expected === 405) assert.match(res.text, /^allow: (GET|POST)/im, `${what}: Allow header`);
      assert.match(res.text, /\r\n\r\n\{"error":/, `${what}: a JSON error body`);
    }
    await Deno.remove(big);
    assert.deepEqual(await Promise.all(TABLES.map((t) => snapshot(db.sql, t))), before);
    assert.ok(!worker.logs.some((l) => l.msg === "request failed"), "no 500 was logged");
  } finally {
    worker.child.kill("SIGTERM");
    assert.equal((await worker.exited).code, 0);
  }
}, REQUIRES);

dbTest("an unreachable database is a 503 from the claim API, not a 500", async () => {
  const dead = connect(`postgres://postgres@127.0.0.1:${freePort()}/none`, {
    schema: "public",
    applicationName: "test-dead",
    max: 1,
  });
  try {
    const { call } = hostApi({ sql: dead });
    for (
      const [method, path, body] of [
        ["POST", "/auto-publish/jobs/claim", undefined],
        ["POST", "/seo/jobs/claim", { limit: 2 }],
        ["GET", "/seo/jobs/1", undefined],
        ["POST", "/auto-publish/recover", undefined],
      ] as const
    ) {
      const res = await call(method, path, body);
      assert.equal(res.status, 503, `${method} ${path}`);
      assert.equal(res.headers.get("retry-after"), "5", `${method} ${path}: Retry-After`);
      assert.match((await res.json()).error, /Database not reachable/);
    }
  } finally {
    await dead.end({ timeout: 1 });
  }
}, REQUIRES);

dbTest(
  "complete pings IndexNow after its commit; with INDEXNOW_URL unset the log says so once",
  async (db) => {
    const pings: unknown[] = [];
    const stub = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
      pings.push(await req.json());
      return new Response(null, { status: 202 });
    });
    const worker = spawnWorker(db, {
      INDEXNOW_URL: `http://127.0.0.1:${stub.addr.port}/indexnow`,
      INDEXNOW_KEY: "key-0123456789",
      SITE_URL: "https://books.example/",
    });
    try {
      const url = await listening(worker);
      assert.ok(!worker.logs.some((l) => /INDEXNOW_URL unset/.test(String(l.msg))));
      const edition = await insertEdition(db.sql);
      await db.sql`insert into auto_publish_jobs (edition_id) values (${edition})`;
      const auth = { authorization: `Bearer ${TEST_TOKEN}`, "content-type": "application/json" };
      const { jobs } = await (await fetch(`${url}/internal/auto-publish/jobs/claim`, {
        method: "POST",
        headers: { authorization: auth.authorization },
      })).json();
      const res = await fetch(`${url}/internal/auto-publish/jobs/${jobs[0].id}/complete`, {
        method: "POST",
        headers: auth,
        body: JSON.stringify({ claim_token: jobs[0].claim_token }),
      });
      assert.equal(res.status, 200);
      await waitFor("the IndexNow ping", () => pings.length === 1, 10_000);
      assert.deepEqual(pings[0], {
        host: "books.example",
        key: "key-0123456789",
        urlList: [`https://books.example/editions/${edition}/`],
      });
      await worker.waitForLog("indexnow pinged", { edition });
    } finally {
      worker.child.kill("SIGTERM");
      assert.equal((await worker.exited).code, 0);
      await stub.shutdown();
    }
    const plain = spawnWorker(db, {});
    try {
      await listening(plain);
      assert.equal(plain.logs.filter((l) => /INDEXNOW_URL unset/.test(String(l.msg))).length, 1);
    } finally {
      plain.child.kill("SIGTERM");
      assert.equal((await plain.exited).code, 0);
    }
  },
  REQUIRES,
);
