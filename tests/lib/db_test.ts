import assert from "node:assert/strict";
import { connect, runCancellable, transaction } from "../../lib/db.ts";
import { retryFaults, sessionGone } from "../../lib/db_fault.ts";
import { createLogger } from "../../lib/log.ts";
import { dbTest, waitFor, within } from "../_db.ts";

const log = createLogger("silent");

dbTest(
  "transaction() runs afterCommit effects in order after COMMIT, and none on rollback",
  async (db) => {
    const seen: string[] = [];
    await transaction(db.sql, log, async (tx) => {
      tx.afterCommit(() => void seen.push("first"));
      tx.afterCommit(() => void seen.push("second"));
      await tx.sql`select 1`;
      assert.deepEqual(seen, [], "nothing runs before the commit");
    });
    assert.deepEqual(seen, ["first", "second"]);
    await assert.rejects(
      transaction(db.sql, log, async (tx) => {
        tx.afterCommit(() => void seen.push("rolled back"));
        await tx.sql`select 1`;
        throw new Error("roll back");
      }),
      /roll back/,
    );
    assert.deepEqual(seen, ["first", "second"]);
  },
);

dbTest("transaction() with a signal aborted during BEGIN never runs a long body", async (db) => {
  for (let i = 0; i < 10; i++) {
    const abort = new AbortController();
    const reason = new Error("Shutting down");
    const t0 = performance.now();
    const running = transaction(db.sql, log, async (tx) => {
      await tx.sql`select pg_sleep(2)`;
    }, abort.signal);
    abort.abort(reason); // lands while BEGIN or the pid query is in flight
    await assert.rejects(running, (err) => err === reason);
    assert.ok(performance.now() - t0 < 1000, `attempt ${i} took ${performance.now() - t0} ms`);
  }
});

dbTest(
  "transaction() aborted while a statement runs cancels it and rejects with the abort reason",
  async (db) => {
    const abort = new AbortController();
    const reason = new Error("Shutting down");
    const running = transaction(db.sql, log, async (tx) => {
      await tx.sql`select pg_sleep(30)`;
    }, abort.signal);
    await waitFor("the statement to run", async () => {
      const rows = await db.sql`
        select 1 from pg_stat_activity
        where application_name = ${db.applicationName} and state = 'active'
          and query like 'select pg_sleep(30)%'`;
      return rows.length > 0;
    });
    const t0 = performance.now();
    abort.abort(reason);
    await assert.rejects(
      within("the aborted transaction", running, 10_000),
      (err) => err === reason,
    );
    assert.ok(performance.now() - t0 < 1000, `took ${performance.now() - t0} ms`);
  },
);

dbTest(
  "transaction() cancel on abort never reaches the next user of the connection",
  async (db) => {
    let cancelled = 0;
    for (let i = 0; i < 50; i++) {
      const abort = new AbortController();
      const running = transaction(db.sql, log, async (tx) => {
        await tx.sql`select pg_sleep(0.02)`;
        abort.abort(new Error("Shutting down")); // after the statement: the cancel finds it idle
      }, abort.signal);
      await assert.rejects(running);
      // Straight after, on the same pool: must not be hit by the late cancel.
      await db.sql`select pg_sleep(0.01)`.catch((err) => {
        if (err.code === "57014") cancelled++;
        else throw err;
      });
    }
    assert.equal(cancelled, 0);
  },
);

dbTest(
  "runCancellable() aborted while its statement runs cancels it and rejects with the abort reason",
  async (db) => {
    const abort = new AbortController();
    const reason = new Error("Shutting down");
    const running = runCancellable(db.sql, (sql) => sql`select pg_sleep(30)`, abort.signal);
    await waitFor("the statement to run", async () => {
      const rows = await db.sql`
        select 1 from pg_stat_activity
        where application_name = ${db.applicationName} and state = 'active'
          and query like 'select pg_sleep(30)%'`;
      return rows.length > 0;
    });
    const t0 = performance.now();
    abort.abort(reason);
    await assert.rejects(
      within("the cancelled statement", running, 10_000),
      (err) => err === reason,
    );
    assert.ok(performance.now() - t0 < 1000, `took ${performance.now() - t0} ms`);
    // Already aborted: nothing is sent.
    await assert.rejects(
      runCancellable(db.sql, (sql) => sql`select 1`, abort.signal),
      (err) => err === reason,
    );
  },
);

dbTest(
  "runCancellable() commits a statement that finished, and its cancel never reaches the next user",
  async (db) => {
    await db.sql`create table counted (n integer)`;
    let cancelled = 0;
    for (let i = 0; i < 30; i++) {
      const abort = new AbortController();
      const rows = await runCancellable(
        db.sql,
        (sql) => sql`insert into counted values (${i}) returning n`,
        abort.signal,
      );
      abort.abort(new Error("Shutting down")); // after the statement: nothing left to cancel
      assert.equal(rows[0].n, i);
      await db.sql`select pg_sleep(0.01)`.catch((err) => {
        if (err.code === "57014") cancelled++;
        else throw err;
      });
    }
    assert.equal(cancelled, 0);
    const [{ count }] = await db.sql`select count(*)::int from counted`;
    assert.equal(count, 30);
  },
);

dbTest(
  "runCancellable() whose session is terminated under it leaves the pool answering (porsager/postgres#1199)",
  async (db) => {
    // One connection: the one whose backend dies is the one the next query must get back working.
    const app = `${db.applicationName}-one`;
    const pool = connect(db.url, { schema: db.schema, applicationName: app, max: 1 });
    try {
      const running = runCancellable(pool, (sql) => sql`select pg_sleep(30)`).then(
        () => null,
        (err: Error) => err,
      );
      const [{ pid }] = await waitFor("the statement to run", async () => {
        const rows = await db.sql<{ pid: number }[]>`
          select pid from pg_stat_activity
          where application_name = ${app} and query like 'select pg_sleep(30)%'`;
        return rows.length > 0 ? rows : null;
      });
      await db.sql`select pg_terminate_backend(${pid}, 10000)`;
      const err = await within("the terminated statement", running, 10_000);
      assert.ok(err && sessionGone(err), `the statement lost its session: ${err}`);
      // Released after its session died, the connection went back among the open ones and the
      // next query on it never settled. retryFaults: postgres.js hands the reconnected session's
      // first query the dead session's last error (lib/db_fault.ts retryFaults says why).
      const [{ x }] = await within(
        "the next query on the pool",
        retryFaults(() => pool<{ x: number }[]>`select 1 as x`, log),
        10_000,
      );
      assert.equal(x, 1);
    } finally {
      await pool.end({ timeout: 1 });
    }
  },
);

Deno.test("retryFaults() tries a faulted write again, up to its tries, and nothing else", async () => {
  const lost = () => Object.assign(new Error("terminating connection"), { code: "57P01" });
  let calls = 0;
  assert.equal(
    await retryFaults(() => ++calls < 3 ? Promise.reject(lost()) : Promise.resolve("ok"), log),
    "ok",
  );
  assert.equal(calls, 3, "two faults, then the write that answered");
  calls = 0;
  await assert.rejects(retryFaults(() => (calls++, Promise.reject(lost())), log, 2), /terminating/);
  assert.equal(calls, 2, "no more than its tries");
  calls = 0;
  const bug = new TypeError("not a fault");
  await assert.rejects(
    retryFaults(() => (calls++, Promise.reject(bug)), log),
    (err) => err === bug,
  );
  assert.equal(calls, 1, "an error that is not a database fault is not tried again");
});

Deno.test("guardDriverCloseCrash() survives postgres.js's closed-socket write and nothing else", async () => {
  const script = new URL("../fixtures/driver_crash.ts", import.meta.url).pathname;
  const run = async (kind: string) => {
    const out = await new Deno.Command(Deno.execPath(), { args: ["run", "-A", script, kind] })
      .output();
    return { code: out.code, stdout: new TextDecoder().decode(out.stdout) };
  };
  const driver = await run("driver");
  assert.equal(driver.code, 0);
  assert.match(driver.stdout, /wrote to a closed connection; ignored/);
  assert.match(driver.stdout, /still alive/);
  const other = await run("other");
  assert.notEqual(other.code, 0, "an unrelated uncaught error still ends the process");
  assert.doesNotMatch(other.stdout, /still alive/);
});
