/**
 * Readiness of the real `main.ts` behind tests/_proxy.ts: a listener that stops
 * delivering (a proxy or pooler that drops notifications) makes `/readyz` 503 with the listener
 * `degraded` while everything else is fine, and 200 again once a probe comes back; and every
 * connection says what it is in `application_name` (the names the proxy sees in each startup
 * message), so an operator can tell them apart in `pg_stat_activity`; and what a dependency writes
 * to the console reaches the JSON log, never stderr as text.
 */
import assert from "node:assert/strict";
import { dbTest, waitFor, within } from "../_db.ts";
import { startProxy } from "../_proxy.ts";
import { spawnWorker } from "../_worker.ts";
import { listening } from "../_host.ts";

const QUEUES = ["ingestion", "ssg", "user_ingestion", "enrichment"];

async function readyz(base: string): Promise<{ status: number; checks: Record<string, unknown> }> {
  const res = await fetch(`${base}/readyz`);
  return { status: res.status, checks: (await res.json()).checks };
}

dbTest(
  "main.ts: /readyz is 503 while the listener is deaf, 200 once a probe comes back; connections are named; stderr stays JSON",
  async (db) => {
    const proxy = startProxy(db.url);
    proxy.dropNotifications(/-listener$/);
    const worker = spawnWorker(db, { DATABASE_URL: proxy.url, LISTENER_PROBE_MS: "1000" }, [
      `--preload=${new URL("../fixtures/console_note_preload.ts", import.meta.url).pathname}`,
    ]);
    try {
      const base = await listening(worker);
      await worker.waitForLog(
        "listener probe missed: notifications are not delivered; reconnecting the listener",
        {},
        30_000,
      );
      for (const queue of QUEUES) await worker.waitForLog("consumer started", { queue }, 30_000);
      // Deaf, and nothing else wrong: the listener alone keeps it unready.
      const deaf = await readyz(base);
      assert.equal(deaf.status, 503, JSON.stringify(deaf.checks));
      assert.deepEqual(
        [deaf.checks.listener, deaf.checks.database, deaf.checks.pooler],
        ["degraded", "ok", "none"],
      );
      assert.deepEqual(deaf.checks.queues, Object.fromEntries(QUEUES.map((q) => [q, "holding"])));

      // ("" only for a connection whose startup message has not arrived yet.)
      const names = new Set(proxy.apps().filter((n) => n !== ""));
      for (
        const name of [
          "textstack",
          "textstack-listener",
          ...QUEUES.map((q) => `textstack-lock-${q}`),
        ]
      ) {
        assert.ok(names.has(name), `no connection named ${name}: ${[...names]}`);
      }
      assert.deepEqual(
        [...names].filter((n) => !/^textstack(-listener|-lock-[a-z_]+)?$/.test(n)),
        [],
        "every connection is named",
      );

      proxy.dropNotifications(null);
      await worker.waitForLog("listener delivers again", {}, 30_000);
      await waitFor("ready", async () => (await readyz(base)).status === 200, 10_000, 100);
      assert.equal((await readyz(base)).checks.listener, "live");

      // What a dependency writes to the console (tests/fixtures/console_note_preload.ts) reaches
      // the log as JSON lines, not stderr as text.
      await worker.waitForLog("runtime message", { note: "a note from a dependency" }, 10_000);
      await worker.waitForLog("runtime message", { note: "an error from a dependency" }, 10_000);
    } finally {
      worker.child.kill("SIGTERM");
      await within("the worker to exit", worker.exited);
      await proxy.close();
    }
    const plain = worker.logs.filter((l) => String(l.msg).startsWith("stderr: "));
    assert.deepEqual(plain, [], "stderr carries only JSON lines");
  },
);
