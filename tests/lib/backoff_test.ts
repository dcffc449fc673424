/**
 * The backoff rules: a database that is not there (or not writable) yet is
 * waited for with a delay capped at 5 s and one log line per step, and repeated faults back off
 * to a cap; which database errors count as transient faults, and which reopen the pool, is
 * decided by {@linkcode dbFault} — checked here on real errors from a real server.
 */
import assert from "node:assert/strict";
import { connect } from "../../lib/db.ts";
import { dbFault, faultDelayMs, recyclePool } from "../../lib/db_fault.ts";
import { waitUntilReachable } from "../../lib/lifecycle.ts";
import { createLogger } from "../../lib/log.ts";
import { dbTest, waitFor } from "../_db.ts";
import { freePort } from "../_fs.ts";

Deno.test("faultDelayMs() doubles from 250 ms with ±20% jitter and never passes its cap", () => {
  for (let n = 1; n <= 12; n++) {
    const base = Math.min(5000, 250 * 2 ** (n - 1));
    for (let i = 0; i < 200; i++) {
      const ms = faultDelayMs(n);
      assert.ok(ms >= base * 0.8 - 1 && ms <= Math.min(5000, base * 1.2) + 1, `n=${n}: ${ms}`);
    }
  }
  for (let i = 0; i < 200; i++) assert.ok(faultDelayMs(30, 1000) <= 1000);
});

Deno.test(
  "waitUntilReachable() retries a refused database with one line per step, capped at 5 s, and stops on its signal",
  async () => {
    const lines: Array<Record<string, unknown>> = [];
    const log = createLogger("silent");
    const spy = Object.create(log);
    spy.warn = (obj: Record<string, unknown>, msg: string) => lines.push({ ...obj, msg });
    const sql = connect(`postgres://postgres@127.0.0.1:${freePort()}/none`, {
      schema: "public",
      applicationName: "test-unreachable",
      max: 1,
    });
    const stop = new AbortController();
    try {
      const waiting = waitUntilReachable("database", () => sql`select 1`, spy, stop.signal);
      // 250 + 500 + 1000 + 2000 + 4000 ms of waiting, then the sixth line, capped.
      const deadline = performance.now() + 30_000;
      while (lines.length < 6 && performance.now() < deadline) {
        await new Promise((r) => setTimeout(r, 50));
      }
      stop.abort();
      assert.equal(await waiting, false, "a stop ends the wait");
      assert.deepEqual(lines.slice(0, 6).map((l) => l.delayMs), [250, 500, 1000, 2000, 4000, 5000]);
      assert.deepEqual(lines.slice(0, 6).map((l) => l.attempt), [1, 2, 3, 4, 5, 6]);
      assert.ok(lines.every((l) => l.msg === "dependency unreachable; retrying"));
    } finally {
      await sql.end({ timeout: 1 });
    }
  },
);

dbTest(
  "dbFault() on real errors: read-only reopens the pool, refused and terminated are retried without, bad data is not a fault",
  async (db) => {
    const readOnly = await db.sql.begin(async (tx) => {
      await tx`set transaction read only`;
      await tx`insert into ingestion_jobs (source_path) values ('x.txt')`;
    }).catch((err) => err);
    assert.deepEqual(dbFault(readOnly), { code: "25006", recycle: true });

    const down = connect(`postgres://postgres@127.0.0.1:${freePort()}/none`, {
      schema: "public",
      applicationName: "test-refused",
      max: 1,
    });
    const refused = await down`select 1`.catch((err) => err);
    await down.end({ timeout: 1 });
    // Retried, but the pool is left alone: the driver reconnects by itself (see DbFault.recycle).
    assert.equal(dbFault(refused)?.recycle, false, String(refused));

    const terminated = connect(db.url, {
      schema: db.schema,
      applicationName: "test-killed",
      max: 1,
    });
    const [{ pid }] = await terminated<{ pid: number }[]>`select pg_backend_pid() as pid`;
    const killed = terminated`select pg_sleep(10)`.catch((err) => err);
    await new Promise((r) => setTimeout(r, 200));
    await db.sql`select pg_terminate_backend(${pid})`;
    const fault = dbFault(await killed);
    await terminated.end({ timeout: 1 });
    assert.equal(fault?.recycle, false, `a terminated session: ${JSON.stringify(fault)}`);

    const notNull = await db.sql`insert into ingestion_jobs (source_path) values (null)`
      .catch((err) => err);
    assert.equal(
      dbFault(notNull),
      null,
      "a constraint violation is a bug or bad data, not a fault",
    );
  },
);

Deno.test("recyclePool() returns at once while a connection is stuck connecting", async () => {
  // A server that accepts and never answers: the pool's connection stays in its startup until
  // connect_timeout (10 s). Waiting for it to end stalled a give-back past the shutdown budget
  // (deno task chaos, "server restart mid-run").
  const hole = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const accepted: Deno.Conn[] = [];
  const accepting = (async () => {
    for await (const conn of hole) accepted.push(conn);
  })().catch(() => {});
  const sql = connect(`postgres://postgres@127.0.0.1:${(hole.addr as Deno.NetAddr).port}/none`, {
    schema: "public",
    applicationName: "test-stuck",
    max: 1,
  });
  const pending = sql`select 1`.catch((err) => err);
  try {
    await waitFor("the pool to connect", () => accepted.length === 1);
    const t0 = performance.now();
    const late = new Promise((r) => setTimeout(() => r("late"), 2000));
    const outcome = await Promise.race([recyclePool(sql).then(() => "returned"), late]);
    const took = performance.now() - t0;
    assert.equal(outcome, "returned");
    assert.ok(took < 500, `recyclePool() took ${Math.round(took)} ms`);
  } finally {
    for (const conn of accepted) conn.close();
    hole.close();
    await accepting;
    await pending;
    await sql.end({ timeout: 0 });
  }
});
