/**
 * lib/idle_gc.ts (issue 11, memory): one full collection after each burst of job events, once
 * they stop; none while they keep coming, none without events.
 *
 * @module
 */
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { EventHub } from "../lib/events.ts";
import { collectWhenIdle, loadGc } from "../lib/idle_gc.ts";
import { waitFor } from "./_db.ts";

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
