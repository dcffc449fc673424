/**
 * lib/idle_gc.ts: one full collection after each burst of job events, once
 * they stop; none while they keep coming, none without events; and one after `markActive()`
 * (main.ts: the startup's), logged with the heap before and after.
 *
 * @module
 */
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { EventHub } from "../../lib/events.ts";
import { collectWhenIdle, loadGc } from "../../lib/idle_gc.ts";
import { dbTest, waitFor } from "../_db.ts";
import { spawnWorker } from "../_worker.ts";
import { createLogger } from "../../lib/log.ts";
import { spyLog } from "../_ingestion.ts";

const EVENT = {
  queue: "ingestion",
  id: "1",
  transition: "completed",
  status: "Completed",
  attempt: 1,
} as const;

Deno.test("collectWhenIdle() collects once after a burst, when no event has come for quietMs", async () => {
  const hub = new EventHub();
  let calls = 0;
  const collector = collectWhenIdle(hub, () => void calls++, 500);
  try {
    await sleep(1000);
    assert.equal(calls, 0, "no events, no collection");
    // A burst longer than quietMs: never collected in the middle of it.
    for (let i = 0; i < 12; i++) {
      hub.publish(EVENT);
      await sleep(50);
    }
    assert.equal(calls, 0, "not while jobs keep moving");
    await waitFor("one collection after the burst", () => calls === 1, 3000, 20);
    await sleep(1000);
    assert.equal(calls, 1, "and not again while idle");
    hub.publish(EVENT);
    await waitFor("the next burst's own collection", () => collector.collections === 2, 3000, 20);
  } finally {
    collector.close();
  }
  hub.publish(EVENT);
  await sleep(1000);
  assert.equal(calls, 2, "nothing after close()");
});

Deno.test("collectWhenIdle(): markActive() is a burst of its own, collected and logged once quiet", async () => {
  const hub = new EventHub();
  let calls = 0;
  const lines: Array<Record<string, unknown>> = [];
  const log = spyLog(createLogger("silent"), "idle gc", lines);
  const collector = collectWhenIdle(hub, () => void calls++, 300, log);
  try {
    collector.markActive();
    await sleep(150);
    hub.publish(EVENT);
    await sleep(200);
    assert.equal(calls, 0, "an event within quietMs of it extends the same burst");
    await waitFor("the collection after markActive()", () => calls === 1, 3000, 20);
    const [line] = lines;
    assert.equal(typeof line?.heapUsedBefore, "number");
    assert.equal(typeof line?.heapUsedAfter, "number");
  } finally {
    collector.close();
  }
  collector.markActive();
  await sleep(600);
  assert.equal(calls, 1, "nothing after close()");
  const none = collectWhenIdle(hub, null, 300);
  none.markActive();
  none.close();
});

Deno.test("loadGc() gives V8's full collection, which frees what nothing holds", () => {
  const gc = loadGc();
  assert.ok(gc, "this runtime exposes gc");
  let junk: unknown[] = Array.from({ length: 300_000 }, (_, i) => ({ i, s: `x${i}` }));
  const held = Deno.memoryUsage().heapUsed;
  junk = [];
  gc();
  assert.ok(
    Deno.memoryUsage().heapUsed < held - 10 * 1024 * 1024,
    `heap after gc ${Deno.memoryUsage().heapUsed} vs ${held}`,
  );
  assert.equal(junk.length, 0);
});

dbTest(
  "main.ts runs one full GC once started: the startup's garbage, logged as idle gc",
  async (db) => {
    const storage = await Deno.makeTempDir({ prefix: "textstack-idle-gc-" });
    const worker = spawnWorker(db, { STORAGE_DIR: storage });
    try {
      await worker.baseUrl();
      const line = await worker.waitForLog("idle gc");
      assert.ok(
        Number(line.heapUsedAfter) < Number(line.heapUsedBefore),
        `heap ${line.heapUsedBefore} → ${line.heapUsedAfter}`,
      );
    } finally {
      worker.child.kill("SIGTERM");
      assert.equal((await worker.exited).code, 0);
      await Deno.remove(storage, { recursive: true });
    }
  },
);
