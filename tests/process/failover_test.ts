/**
 * A PostgreSQL failover, for real (tests/_pg_cluster.ts): a PostgreSQL 15 primary and a
 * synchronous streaming replica on this machine, the worker (main.ts, spawned) given both as a
 * host list with `target_session_attrs=read-write`, ingestion books streaming in and site rebuilds
 * running; then the primary is stopped with `-m immediate` and the replica promoted about 1 s
 * later. The worker never keeps a session on the server in recovery (no lock, no pool connection,
 * no listener), follows the promotion, re-LISTENs on the new primary at once (the poll and the
 * listener probe are set far beyond the test), and loses, doubles and strands no job; `/readyz`
 * is 503 during the gap and 200 after. The gap is printed.
 *
 * Needs the Debian package postgresql-15 (/usr/lib/postgresql/15/bin); skipped without it, and
 * failed instead under CI=true.
 */
import assert from "node:assert/strict";
import postgres from "postgres";
import { connect, InRecoveryError } from "../../lib/db.ts";
import { Listener } from "../../lib/listener.ts";
import { QueueLock } from "../../lib/lock.ts";
import { createLogger } from "../../lib/log.ts";
import { Wake } from "../../lib/wake.ts";
import { waitFor, within } from "../_db.ts";
import { PG15_BIN, pg15Installed, type PgCluster, startPgCluster } from "../_pg_cluster.ts";
import { spawnWorker, TEST_TOKEN } from "../_worker.ts";
import { skipNote } from "../_requires.ts";

const BOOKS = 40;
const SCHEMA = "failover";
const book = (n: number) =>
  `Book ${n}\nby Failover\n\nCHAPTER I\n\nOne ${n}.\n\nCHAPTER II\n\nTwo.\n`;

/** These tests need postgresql-15 (tests/_requires.ts: ignored where missing, outside CI). */
const SKIP = skipNote(["postgresql-15"]);
const named = (name: string) => SKIP ? `${name} [skipped: ${SKIP}]` : name;

/** Run only where the binaries are installed, or under CI=true, where their absence fails. */
function assertInstalled(): void {
  if (!pg15Installed()) {
    throw new Error(
      `CI: the PostgreSQL 15 binaries are missing (${PG15_BIN}): apt-get install postgresql-15`,
    );
  }
}

Deno.test({
  name: named(
    "failover: a standby in recovery gets no lock and no LISTEN, even from a single-host URL",
  ),
  ignore: SKIP !== null,
  async fn() {
    assertInstalled();
    const cluster = await startPgCluster();
    const log = createLogger("silent");
    try {
      const standby = cluster.url(cluster.replicaPort);
      const lock = new QueueLock({ url: standby, schema: SCHEMA, queue: "ingestion", log });
      await assert.rejects(lock.tryAcquire(), InRecoveryError);
      assert.equal(lock.held, false);
      const listener = new Listener({
        connect: (hooks) =>
          connect(standby, {
            schema: SCHEMA,
            applicationName: "t-listener",
            max: 1,
            dedicated: true,
            ...hooks,
          }),
        pool: connect(standby, { schema: SCHEMA, applicationName: "t-pool", max: 1 }),
        log,
        probeChannel: `${SCHEMA}._probe`,
      });
      await assert.rejects(listener.listen(`${SCHEMA}.ingestion_jobs`, new Wake("x")), (err) => {
        assert.ok(err instanceof InRecoveryError, String(err));
        assert.match(err.message, /in recovery/);
        return true;
      });
      await listener.close();
      // The primary, by the same code, takes both.
      const primary = cluster.url(cluster.primaryPort);
      const held = new QueueLock({ url: primary, schema: SCHEMA, queue: "ingestion", log });
      assert.equal(await held.tryAcquire(), true);
      await held.release();
    } finally {
      await cluster.destroy();
    }
  },
});

Deno.test({
  name: named(
    "failover: primary stopped -m immediate, replica promoted 1 s later: nothing lost, doubled or stranded; the worker follows within seconds",
  ),
  ignore: SKIP !== null,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    assertInstalled();
    const cluster: PgCluster = await startPgCluster();
    const root = await Deno.makeTempDir({ prefix: "textstack-failover-" });
    const storage = `${root}/storage`;
    await Deno.mkdir(storage, { recursive: true });
    for (let n = 1; n <= BOOKS + 3; n++) await Deno.writeTextFile(`${storage}/b${n}.txt`, book(n));
    const worker = spawnWorker(null, {
      DATABASE_URL: cluster.hostList("read-write"),
      DATABASE_SCHEMA: SCHEMA,
      DATA_DIR: `${root}/data`,
      STORAGE_DIR: storage,
      SITE_DIR: `${root}/site`,
      // Far beyond the test: every wake after the failover must come from a NOTIFY.
      POLL_INTERVAL_MS: "120000",
      LISTENER_PROBE_MS: "120000",
      STANDBY_RETRY_MS: "200",
      SHUTDOWN_BUDGET_MS: "3000",
    });
    // The test's own client follows the primary by postgres.js's own options, not through the
    // worker's URL handling (lib/database_url.ts), which is under test.
    const sql = postgres({
      host: ["127.0.0.1", "127.0.0.1"],
      port: [cluster.primaryPort, cluster.replicaPort],
      user: "postgres",
      database: "postgres",
      target_session_attrs: "primary",
      max: 2,
      onnotice: () => {},
      connection: { application_name: "failover-test", search_path: SCHEMA },
    } as unknown as postgres.Options<Record<string, never>>);
    const standby = connect(cluster.url(cluster.replicaPort), {
      schema: SCHEMA,
      applicationName: "failover-observer",
      max: 1,
    });
    let stopSampling = false;
    try {
      const listening = await worker.waitForLog("http listening", {}, 60_000);
      const base = `http://127.0.0.1:${listening.port}`;
      for (const queue of ["ingestion", "user_ingestion", "enrichment", "ssg"]) {
        await worker.waitForLog("consumer started", { queue }, 30_000);
      }
      await waitFor("ready", async () => (await fetch(`${base}/readyz`)).status === 200, 15_000, 50)
        .catch(async (err) => {
          throw new Error(`${err.message}: ${await (await fetch(`${base}/readyz`)).text()}`);
        });
      const rebuild = async () => {
        const res = await fetch(`${base}/internal/ssg/rebuild-all`, {
          method: "POST",
          headers: { authorization: `Bearer ${TEST_TOKEN}` },
        });
        assert.ok(res.status === 200 || res.status === 201, `rebuild-all: ${res.status}`);
        await res.body?.cancel();
      };
      await rebuild();
      const enqueue = (n: number) =>
        sql`insert into ingestion_jobs (source_path) values (${`b${n}.txt`})`;

      // Readiness and the standby's sessions, sampled from here to the end.
      // Readiness, asked every 100 ms (each answer stamped with when it came), and the standby's
      // sessions, sampled from here to the end.
      const ready: Array<{ t: number; status: number }> = [];
      const asked: Promise<void>[] = [];
      const onStandby: Array<{ t: number; sessions: string[] }> = [];
      const sampling = (async () => {
        while (!stopSampling) {
          asked.push(
            fetch(`${base}/readyz`, { signal: AbortSignal.timeout(3000) })
              .then(async (r) => (await r.body?.cancel(), r.status), () => 0)
              .then((status) => void ready.push({ t: performance.now(), status })),
          );
          await new Promise((r) => setTimeout(r, 100));
        }
        await Promise.all(asked);
      })();
      let promotedAt = Infinity;
      const watching = (async () => {
        // A session of the worker that has lived 300 ms on the server while it is in recovery is
        // one the worker kept there (a driver's target check opens and drops a session in ms).
        while (!stopSampling && performance.now() < promotedAt) {
          const rows = await standby<{ name: string }[]>`
            select application_name as name from pg_stat_activity
            where application_name like 'textstack%' and pg_is_in_recovery()
              and backend_start < clock_timestamp() - interval '300 ms'`.catch(() => []);
          if (performance.now() < promotedAt) {
            onStandby.push({ t: performance.now(), sessions: rows.map((r) => r.name) });
          }
          await new Promise((r) => setTimeout(r, 50));
        }
      })();

      // The first 15 books, then the crash with jobs in flight, the rest streaming on.
      for (let n = 1; n <= 15; n++) {
        await enqueue(n);
        await new Promise((r) => setTimeout(r, 60));
      }
      await waitFor(
        "some books done",
        async () => {
          const [{ done }] = await sql<{ done: number }[]>`
          select count(*)::int as done from ingestion_jobs where status = 'Completed'`;
          return done >= 3;
        },
        20_000,
        20,
      );
      const crashAt = performance.now();
      await cluster.crashPrimary();
      const streaming = (async () => {
        for (let n = 16; n <= BOOKS; n++) {
          await enqueue(n);
          await new Promise((r) => setTimeout(r, 60));
        }
      })();
      await new Promise((r) => setTimeout(r, Math.max(0, 1000 - (performance.now() - crashAt))));
      // The gap ends when the promotion starts: the worker may follow the new primary before
      // `pg_ctl promote` has returned.
      const promotingAt = performance.now();
      await cluster.promoteReplica();
      promotedAt = performance.now();
      await within("the books streamed in during the failover", streaming, 20_000);
      await rebuild();
      await waitFor(
        "every book completed",
        async () => {
          const [{ done }] = await sql<{ done: number }[]>`
          select count(*)::int as done from ingestion_jobs where status = 'Completed'`;
          return done === BOOKS;
        },
        30_000,
        50,
      ).catch(async (err) => {
        const rows =
          await sql`select id, status, error from ingestion_jobs where status <> 'Completed'`;
        throw new Error(`${err.message}: ${JSON.stringify(rows)}`);
      });
      const firstReadyAfter = await waitFor(
        "ready after the failover",
        () => ready.find((s) => s.t > crashAt && s.status === 200 && s.t > promotingAt),
        15_000,
        50,
      );
      // The listener is back on the new primary: a job inserted now is woken by its NOTIFY
      // (the poll and the probe are two minutes away).
      for (let n = BOOKS + 1; n <= BOOKS + 3; n++) {
        const [{ id }] = await sql<{ id: string }[]>`
          insert into ingestion_jobs (source_path) values (${`b${n}.txt`}) returning id`;
        await worker.waitForLog("job completed", { id }, 5000);
      }
      stopSampling = true;
      await within("the samplers", Promise.all([sampling, watching]), 10_000);

      const gapS = (firstReadyAfter.t - crashAt) / 1000;
      const promoteToReadyS = (firstReadyAfter.t - promotingAt) / 1000;
      console.log(
        `failover: primary stopped -m immediate, replica promoted after ${
          ((promotedAt - crashAt) / 1000).toFixed(2)
        } s; /readyz 200 again ${gapS.toFixed(2)} s after the stop (${
          promoteToReadyS.toFixed(2)
        } s after the promotion)`,
      );

      // No session of the worker was kept on the server in recovery.
      assert.ok(onStandby.length > 5, `sampled the standby ${onStandby.length} times`);
      assert.deepEqual(onStandby.filter((s) => s.sessions.length > 0), []);
      // Readiness: 503 throughout the gap (answers from shortly after the stop to the promotion).
      const inGap = ready.filter((s) => s.t > crashAt + 300 && s.t < promotingAt);
      assert.ok(inGap.length > 0, "readiness sampled during the gap");
      assert.deepEqual(inGap.filter((s) => s.status === 200), [], "no 200 during the gap");
      assert.ok(promoteToReadyS < 10, `ready ${promoteToReadyS} s after the promotion`);
      // The listener re-listened on its own, not at a probe.
      assert.ok(
        worker.logs.some((l) => l.msg === "listening" && l.reconnect === true),
        "the listener re-listened",
      );

      // Nothing lost, nothing run twice, nothing stranded.
      const [counts] = await sql<
        { completed: number; open: number; editions: number; ssg_open: number; ssg_done: number }[]
      >`
        select count(*) filter (where status = 'Completed')::int as completed,
               count(*) filter (where status <> 'Completed')::int as open,
               (select count(*)::int from editions) as editions,
               (select count(*)::int from ssg_rebuild_jobs where status <> 'Completed') as ssg_open,
               (select count(*)::int from ssg_rebuild_jobs where status = 'Completed') as ssg_done
        from ingestion_jobs`;
      assert.deepEqual(
        { ...counts, ssg_done: counts.ssg_done >= 2 },
        { completed: BOOKS + 3, open: 0, editions: BOOKS + 3, ssg_open: 0, ssg_done: true },
      );
      const completions = new Map<string, number>();
      for (const l of worker.logs) {
        if (l.msg === "job completed" && l.queue === "ingestion") {
          completions.set(String(l.id), (completions.get(String(l.id)) ?? 0) + 1);
        }
      }
      assert.equal(completions.size, BOOKS + 3);
      assert.deepEqual([...completions].filter(([, n]) => n > 1), [], "no job completed twice");

      worker.child.kill("SIGTERM");
      const status = await within("the worker to exit", worker.exited);
      assert.equal(status.code, 0);
      const [{ processing }] = await sql<{ processing: number }[]>`
        select (select count(*) from ingestion_jobs where status = 'Processing')::int +
               (select count(*) from ssg_rebuild_jobs where status = 'Running')::int as processing`;
      assert.equal(processing, 0);
    } finally {
      stopSampling = true;
      try {
        worker.child.kill("SIGKILL");
      } catch { /* exited */ }
      await worker.exited;
      await sql.end({ timeout: 1 }).catch(() => {});
      await standby.end({ timeout: 1 }).catch(() => {});
      await cluster.destroy();
      await Deno.remove(root, { recursive: true }).catch(() => {});
    }
  },
});
