import assert from "node:assert/strict";
import { dbTest, type TestDb, waitFor } from "../_db.ts";
import { insertJob, jobRow, SMALL_BOOK } from "../_ingestion.ts";
import { postJson, spawnWorker, TEST_TOKEN } from "../_worker.ts";
import { mkfifo } from "../_fs.ts";

async function storage(): Promise<string> {
  return await Deno.makeTempDir({ prefix: "textstack-process-" });
}

/**
 * Spawn main.ts and get a job in flight: its source is a FIFO nobody writes to, so the run stays
 * open until it is aborted. The API refuses FIFOs (they could block the queue), so the row is
 * inserted directly.
 */
async function startWithRunningJob(db: TestDb, env: Record<string, string> = {}) {
  const dir = await storage();
  await mkfifo(`${dir}/stream.txt`);
  const worker = spawnWorker(db, { STORAGE_DIR: dir, ...env });
  await worker.waitForLog("consumer started");
  const id = await insertJob(db, "stream.txt");
  await worker.waitForLog("job claimed", { id });
  return { worker, id, dir };
}

dbTest(
  "main.ts on SIGTERM gives the running job back and exits 0 within the budget",
  async (db) => {
    const { worker, id } = await startWithRunningJob(db, { SHUTDOWN_BUDGET_MS: "3000" });
    const base = await worker.baseUrl();
    assert.equal((await (await fetch(`${base}/healthz`)).json()).status, "ok");
    assert.equal((await jobRow(db, id)).status, "Processing");
    const t0 = performance.now();
    worker.child.kill("SIGTERM");
    const status = await worker.exited;
    const took = performance.now() - t0;
    assert.equal(status.code, 0);
    assert.ok(took < 3000, `exit took ${took} ms with a 3000 ms budget`);
    const row = await jobRow(db, id);
    assert.deepEqual([row.status, row.attempt_count, row.error, row.claimed_by], [
      "Queued",
      0,
      null,
      null,
    ]);
    await worker.waitForLog("job given back", { id });
  },
);

dbTest(
  "main.ts after SIGKILL mid-job: the successor re-picks the job at once on taking the lock, attempt counted",
  async (db) => {
    const dir = await storage();
    const fifo = `${dir}/stream.txt`;
    await mkfifo(fifo);
    // The default stale threshold (10 min): the lock, not staleness, proves the owner is gone.
    const env = { STORAGE_DIR: dir };
    const first = spawnWorker(db, env);
    await first.waitForLog("consumer started");
    const id = await insertJob(db, "stream.txt");
    await first.waitForLog("job claimed", { id });
    first.child.kill("SIGKILL");
    assert.equal((await first.exited).signal, "SIGKILL");

    const second = spawnWorker(db, env);
    await second.waitForLog("consumer started");
    await second.waitForLog("orphan recovered (its consumer is gone)", { id });
    await second.waitForLog("job claimed", { id, attempt: 2 });
    // Give the re-picked run its file: the FIFO's writer unblocks the reader.
    await Deno.writeTextFile(fifo, SMALL_BOOK);
    await waitFor("completion", async () => (await jobRow(db, id)).status === "Completed", 20_000);
    assert.equal((await jobRow(db, id)).attempt_count, 2);
    second.child.kill("SIGTERM");
    assert.equal((await second.exited).code, 0);
  },
);

dbTest("main.ts second instance stands by and takes over after the first's SIGTERM", async (db) => {
  const dir = await storage();
  await Deno.writeTextFile(`${dir}/book.txt`, SMALL_BOOK);
  const first = spawnWorker(db, { STORAGE_DIR: dir });
  await first.baseUrl();
  await first.waitForLog("consumer started");
  const second = spawnWorker(db, { STORAGE_DIR: dir });
  const secondBase = await second.baseUrl();
  await second.waitForLog("another consumer holds the queue; standing by");

  const a =
    await (await postJson(`${secondBase}/internal/ingestion/jobs`, { source_path: "book.txt" }))
      .json();
  await first.waitForLog("job completed", { id: a.id });
  assert.equal(second.logs.some((l) => l.msg === "job claimed"), false);

  first.child.kill("SIGTERM");
  assert.equal((await first.exited).code, 0);
  await second.waitForLog("consumer started", {}, 5000);
  const b =
    await (await postJson(`${secondBase}/internal/ingestion/jobs`, { source_path: "book.txt" }))
      .json();
  await second.waitForLog("job completed", { id: b.id });
  assert.equal((await jobRow(db, b.id)).status, "Completed");
  second.child.kill("SIGTERM");
  assert.equal((await second.exited).code, 0);
});

dbTest("main.ts exits at once with a non-zero code on a second signal", async (db) => {
  const { worker } = await startWithRunningJob(db);
  worker.child.kill("SIGTERM");
  worker.child.kill("SIGINT");
  const status = await worker.exited;
  assert.equal(status.code, 130);
  assert.ok(worker.logs.some((l) => l.msg === "second signal; exiting now"));
});

Deno.test("main.ts refuses a bad setting at startup, naming it", async () => {
  const worker = spawnWorker(null, {
    POLL_INTERVAL_MS: "0",
    DATABASE_URL: "postgres://x@127.0.0.1:1/x",
  });
  const status = await worker.exited;
  assert.equal(status.code, 2);
  const line = worker.logs.find((l) => l.msg === "invalid configuration");
  assert.equal(
    line?.err,
    'Cannot parse POLL_INTERVAL_MS: expected a positive integer (ms) up to 2147483647, received "0"',
  );
});

Deno.test("main.ts refuses every bad or ignored setting at startup with exit 2, naming it", async () => {
  // The database is unreachable: a setting that got past the check would leave the worker
  // retrying it instead of exiting 2.
  const cases: Array<[Record<string, string>, string]> = [
    [{ ENRICHMENT_API_TIMEOUT_MS: "abc" }, "Cannot parse ENRICHMENT_API_TIMEOUT_MS: "],
    [{ SSG_STALE_AFTER_MS: "60000" }, "Cannot use SSG_STALE_AFTER_MS: the ssg queue has no stale"],
    [{ SEO_TIMEOUT_MS: "60000" }, "Cannot use SEO_TIMEOUT_MS: "],
    [{ AUTO_PUBLISH_STALE_AFTER_MS: "60000" }, "Cannot use AUTO_PUBLISH_STALE_AFTER_MS: "],
    [{ INDEXNOW_KEY: "?" }, "Cannot parse INDEXNOW_KEY: "],
    [{ HOST: "not a host!" }, "Cannot parse HOST: "],
  ];
  for (const [env, message] of cases) {
    const worker = spawnWorker(null, { ...env, DATABASE_URL: "postgres://x@127.0.0.1:1/x" });
    const timer = setTimeout(() => worker.child.kill("SIGKILL"), 15_000);
    const status = await worker.exited;
    clearTimeout(timer);
    const line = worker.logs.find((l) => l.msg === "invalid configuration");
    assert.equal(status.code, 2, `${JSON.stringify(env)}: ${JSON.stringify(worker.logs)}`);
    assert.ok(String(line?.err).startsWith(message), `${JSON.stringify(env)}: ${line?.err}`);
    assert.ok(!worker.logs.some((l) => l.msg === "starting"), "nothing starts before the check");
  }
});

Deno.test("main.ts refuses a HOST or PORT it cannot listen on with exit 2, before touching the database", async () => {
  // A stand-in server that only counts connections: the worker must exit before it connects.
  const database = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  let connections = 0;
  (async () => {
    for await (const conn of database) connections++, conn.close();
  })().catch(() => {});
  const taken = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const takenPort = (taken.addr as Deno.NetAddr).port;
  const url = `postgres://x@127.0.0.1:${(database.addr as Deno.NetAddr).port}/x`;
  const cases: Array<[Record<string, string>, string]> = [
    // TEST-NET-1 (RFC 5737): a well-formed address this machine does not have.
    [{ HOST: "192.0.2.1" }, "Cannot use HOST and PORT: cannot listen on 192.0.2.1:0: "],
    [
      { PORT: String(takenPort) },
      `Cannot use HOST and PORT: cannot listen on 127.0.0.1:${takenPort}: `,
    ],
  ];
  try {
    for (const [env, message] of cases) {
      const worker = spawnWorker(null, { ...env, DATABASE_URL: url });
      const timer = setTimeout(() => worker.child.kill("SIGKILL"), 15_000);
      const status = await worker.exited;
      clearTimeout(timer);
      assert.equal(status.code, 2, `${JSON.stringify(env)}: ${JSON.stringify(worker.logs)}`);
      const line = worker.logs.find((l) => l.msg === "invalid configuration");
      assert.ok(String(line?.err).startsWith(message), `${JSON.stringify(env)}: ${line?.err}`);
      assert.equal(connections, 0, "the database was touched");
    }
  } finally {
    taken.close();
    database.close();
  }
});

Deno.test("main.ts retries an unreachable database with backoff, saying so, and stops on SIGTERM", async () => {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  const worker = spawnWorker(null, {
    DATABASE_URL: `postgres://postgres@127.0.0.1:${port}/postgres`,
  });
  await worker.waitForLog("dependency unreachable; retrying", { attempt: 2 });
  const delays = worker.logs.filter((l) => l.msg === "dependency unreachable; retrying")
    .map((l) => l.delayMs as number);
  assert.ok(delays[1] > delays[0], `backoff grows: ${delays}`);
  worker.child.kill("SIGTERM");
  assert.equal((await worker.exited).code, 0);
});

dbTest(
  "main.ts on SIGHUP (a closed terminal) gives the running job back and exits 0",
  async (db) => {
    const { worker, id } = await startWithRunningJob(db);
    worker.child.kill("SIGHUP");
    assert.equal((await worker.exited).code, 0);
    const row = await jobRow(db, id);
    assert.deepEqual([row.status, row.attempt_count, row.error], ["Queued", 0, null]);
  },
);

/** A request body sent in chunks (`Transfer-Encoding: chunked`, no `Content-Length`). */
function chunked(text: string): ReadableStream<Uint8Array> {
  return new ReadableStream({
    start(controller) {
      controller.enqueue(new TextEncoder().encode(text));
      controller.close();
    },
  });
}

dbTest(
  "main.ts logs no runtime notice for a chunked request body (Deno.serve's legacy request.signal abort)",
  async (db) => {
    const worker = spawnWorker(db, { STORAGE_DIR: await storage() });
    try {
      const base = await worker.baseUrl();
      // hono's bodyLimit re-reads a chunked body into a new Request, which reads request.signal;
      // under Deno's legacy abort mode that logged a warning once per process.
      const api = await fetch(`${base}/internal/ingestion/jobs`, {
        method: "POST",
        headers: { authorization: `Bearer ${TEST_TOKEN}`, "content-type": "application/json" },
        body: chunked(JSON.stringify({ source_path: "missing.txt" })),
      });
      assert.equal(api.status, 400);
      await api.body?.cancel();
      const login = await fetch(`${base}/admin/login`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded", origin: base },
        body: chunked(`token=${TEST_TOKEN}`),
        redirect: "manual",
      });
      assert.equal(login.status, 303);
      await login.body?.cancel();
      // The notice is written when a request closes: one more round trip passes that point.
      assert.equal((await fetch(`${base}/healthz`)).status, 200);
      assert.equal((await fetch(`${base}/healthz`)).status, 200);
      const notices = worker.logs.filter((l) =>
        l.msg === "runtime message" || String(l.msg).startsWith("stderr: ")
      );
      assert.deepEqual(notices, []);
    } finally {
      worker.child.kill("SIGTERM");
      assert.equal((await worker.exited).code, 0);
    }
  },
);

dbTest(
  "main.ts over HTTP: token refusals are 401 with a Bearer challenge; sign-in past 10 refusals is 429",
  async (db) => {
    const worker = spawnWorker(db, { STORAGE_DIR: await storage() });
    try {
      const base = await worker.baseUrl();
      for (
        const [path, realm] of [["/internal/openapi.json", "internal"], ["/metrics", "metrics"]]
      ) {
        for (const authorization of [undefined, "Basic dXNlcjpwYXNz", "Bearer wrong-token"]) {
          const res = await fetch(`${base}${path}`, {
            headers: authorization ? { authorization } : {},
          });
          assert.equal(res.status, 401, `${path} ${authorization}`);
          assert.match(
            res.headers.get("www-authenticate") ?? "",
            new RegExp(`^Bearer realm="textstack-${realm}"`),
          );
          await res.body?.cancel();
        }
      }
      const signIn = async (token: string) => {
        const res = await fetch(`${base}/admin/login`, {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded", origin: base },
          body: new URLSearchParams({ token }),
          redirect: "manual",
        });
        await res.body?.cancel();
        return res;
      };
      for (let i = 0; i < 10; i++) assert.equal((await signIn("wrong-wrong-wrong")).status, 401);
      const limited = await signIn(TEST_TOKEN);
      assert.equal(limited.status, 429);
      assert.ok(Number(limited.headers.get("retry-after")) > 0);
      await worker.waitForLog("admin login rate-limited", { client: "127.0.0.1" });
    } finally {
      worker.child.kill("SIGTERM");
      assert.equal((await worker.exited).code, 0);
    }
  },
);
