/**
 * Drain (ADR-052): in-order handling, per-item failure, budgeted stop with handlers that honour or
 * ignore abort, parked writers, shutdown cancellation kept out of the error log, and rate-limited
 * drop warnings. Logs are captured from a real pino logger.
 *
 * @module
 */
import assert from "node:assert/strict";
import { setTimeout as delay } from "node:timers/promises";
import { pino } from "pino";
import { BoundedChannel } from "../../lib/channel.ts";
import { Drain } from "../../lib/drain.ts";

interface LogLine {
  level: number;
  time: number;
  msg: string;
  drain?: string;
  abandoned?: number;
  drained?: number;
  dropped?: number;
  err?: { message: string };
}

const levels = { debug: 20, info: 30, warn: 40, error: 50 } as const;

function captureLog() {
  const lines: LogLine[] = [];
  const log = pino({ level: "debug" }, {
    write(line: string): void {
      lines.push(JSON.parse(line));
    },
  });
  return { log, lines, withMsg: (msg: string) => lines.filter((l) => l.msg === msg) };
}

async function waitFor(condition: () => boolean, what: string, timeoutMs = 2_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!condition()) {
    if (performance.now() > deadline) throw new Error(`Timed out after ${timeoutMs} ms: ${what}`);
    await delay(2);
  }
}

// Blocks until the drain aborts it, the way a well-behaved long handler does.
function untilAborted(signal: AbortSignal): Promise<void> {
  return new Promise((_, reject) => {
    if (signal.aborted) reject(signal.reason);
    signal.addEventListener("abort", () => reject(signal.reason), { once: true });
  });
}

Deno.test("Drain rejects a non-positive dropLogIntervalMs and a bad stop budget", async () => {
  const { log } = captureLog();
  const channel = new BoundedChannel<number>({ capacity: 1, mode: "wait" });
  const handle = (): Promise<void> => Promise.resolve();
  assert.throws(
    () => new Drain({ name: "jobs", channel, handle, log, dropLogIntervalMs: 0 }),
    /Cannot create drain "jobs": expected dropLogIntervalMs to be a positive number/,
  );
  const drain = new Drain({ name: "jobs", channel, handle, log });
  await assert.rejects(drain.stop(-1), RangeError);
  await assert.rejects(drain.stop(Number.NaN), RangeError);
  drain.start();
  assert.throws(() => drain.start(), /Cannot start drain "jobs": it is already running/);
  assert.deepEqual(await drain.stop(100), { abandoned: 0 });
  assert.throws(() => drain.start(), /Cannot start drain "jobs": it was stopped/);
});

Deno.test("Drain handles items in order", async () => {
  const { log, withMsg } = captureLog();
  const channel = new BoundedChannel<number>({ capacity: 16, mode: "wait" });
  const handled: number[] = [];
  const drain = new Drain({
    name: "ordered",
    channel,
    handle: async (item) => {
      await delay(item % 2); // uneven pace must not reorder
      handled.push(item);
    },
    log,
  });
  drain.start();
  for (let i = 1; i <= 5; i++) channel.tryWrite(i);
  await waitFor(() => handled.length === 5, "five items handled");
  for (let i = 6; i <= 8; i++) await channel.write(i);
  await waitFor(() => handled.length === 8, "eight items handled");
  assert.deepEqual(handled, [1, 2, 3, 4, 5, 6, 7, 8]);
  assert.deepEqual(await drain.stop(1_000), { abandoned: 0 });
  const [stopped] = withMsg("drain stopped");
  assert.equal(stopped.level, levels.info);
  assert.equal(stopped.abandoned, 0);
});

Deno.test("Drain keeps handling after an item throws and logs it as an error", async () => {
  const { log, lines, withMsg } = captureLog();
  const channel = new BoundedChannel<number>({ capacity: 16, mode: "wait" });
  const handled: number[] = [];
  const drain = new Drain({
    name: "flaky",
    channel,
    handle: (item) => {
      if (item === 3) throw new Error("item 3 threw synchronously");
      return (async () => {
        await delay(1);
        if (item === 2) throw new Error("item 2 failed");
        handled.push(item);
      })();
    },
    log,
  });
  drain.start();
  for (let i = 1; i <= 5; i++) channel.tryWrite(i);
  await waitFor(() => handled.length === 3, "items 1, 4 and 5 handled");
  assert.deepEqual(handled, [1, 4, 5]);
  const failures = withMsg("drain item failed");
  assert.deepEqual(failures.map((l) => [l.level, l.drain, l.err?.message]), [
    [levels.error, "flaky", "item 2 failed"],
    [levels.error, "flaky", "item 3 threw synchronously"],
  ]);
  assert.deepEqual(await drain.stop(1_000), { abandoned: 0 });
  assert.equal(lines.filter((l) => l.level >= levels.error).length, 2);
});

Deno.test("Drain.stop returns at about the budget when slow items honour abort", async () => {
  const { log, lines, withMsg } = captureLog();
  const channel = new BoundedChannel<number>({ capacity: 16, mode: "wait" });
  const calls: { item: number; signal: AbortSignal; abortedAtStart: boolean }[] = [];
  const drain = new Drain({
    name: "slow",
    channel,
    handle: async (item, signal) => {
      calls.push({ item, signal, abortedAtStart: signal.aborted });
      await delay(2_000, undefined, { signal });
    },
    log,
  });
  drain.start();
  for (let i = 1; i <= 10; i++) channel.tryWrite(i);
  await waitFor(() => calls.length === 1, "first item in flight");

  const budgetMs = 500;
  const startedAt = performance.now();
  const { abandoned } = await drain.stop(budgetMs);
  const elapsedMs = performance.now() - startedAt;
  assert.ok(elapsedMs >= budgetMs - 5, `stop() returned early, after ${elapsedMs.toFixed(0)} ms`);
  assert.ok(elapsedMs < budgetMs + 300, `stop() took ${elapsedMs.toFixed(0)} ms`);
  assert.equal(abandoned, 10);

  // The in-flight item was cut off; the loop returned, so item 2 got a fresh, live signal that
  // the deadline then aborted.
  assert.deepEqual(calls.map((c) => [c.item, c.abortedAtStart]), [[1, false], [2, false]]);
  assert.notEqual(calls[1].signal, calls[0].signal);
  assert.equal(calls[1].signal.aborted, true);
  const [stopped] = withMsg("drain stopped");
  assert.deepEqual([stopped.level, stopped.abandoned, stopped.drained], [levels.warn, 10, 0]);
  await waitFor(
    () => withMsg("drain item cancelled by shutdown").length === 2,
    "both cut-off items logged",
  );
  assert.deepEqual(lines.filter((l) => l.level >= levels.error), []);
});

Deno.test("Drain.stop returns at about the budget when the in-flight item ignores abort", async () => {
  const { log, withMsg } = captureLog();
  const channel = new BoundedChannel<number>({ capacity: 16, mode: "wait" });
  const calls: number[] = [];
  const drain = new Drain({
    name: "stubborn",
    channel,
    handle: async (item) => {
      calls.push(item);
      await delay(2_000);
    },
    log,
  });
  drain.start();
  for (let i = 1; i <= 10; i++) channel.tryWrite(i);
  await waitFor(() => calls.length === 1, "first item in flight");

  const budgetMs = 500;
  const startedAt = performance.now();
  const { abandoned } = await drain.stop(budgetMs);
  const elapsedMs = performance.now() - startedAt;
  assert.ok(elapsedMs >= budgetMs - 5, `stop() returned early, after ${elapsedMs.toFixed(0)} ms`);
  assert.ok(elapsedMs < budgetMs + 300, `stop() took ${elapsedMs.toFixed(0)} ms`);
  assert.equal(abandoned, 10);
  const [stopped] = withMsg("drain stopped");
  assert.deepEqual([stopped.level, stopped.abandoned], [levels.warn, 10]);

  // The stubborn handler finishes on its own; the loop must then end without reading more.
  await waitFor(() => withMsg("drain loop ended").length === 1, "loop ended", 3_000);
  assert.deepEqual(calls, [1]);
  assert.equal(channel.size, 9);
});

Deno.test("Drain.stop is not held by a writer parked on a full wait-mode channel", async () => {
  const { log, withMsg } = captureLog();
  const channel = new BoundedChannel<number>({ capacity: 1, mode: "wait" });
  const handled: number[] = [];
  let inFlight = 0;
  const drain = new Drain({
    name: "parked",
    channel,
    handle: async (item, signal) => {
      inFlight = item;
      if (item === 1) await untilAborted(signal);
      handled.push(item);
    },
    log,
  });
  drain.start();
  channel.tryWrite(1);
  await waitFor(() => inFlight === 1, "item 1 in flight");
  assert.equal(channel.tryWrite(2), true);
  const parked = channel.write(3);

  const startedAt = performance.now();
  const { abandoned } = await drain.stop(2_000);
  const elapsedMs = performance.now() - startedAt;
  assert.ok(elapsedMs < 300, `stop() took ${elapsedMs.toFixed(0)} ms`);
  assert.equal(await parked, false);
  assert.equal(abandoned, 1);
  assert.deepEqual(handled, [2]);
  assert.equal(withMsg("drain stopped")[0].drained, 1);
  assert.deepEqual(channel.stats(), {
    attempted: 3,
    delivered: 2,
    dropped: 0,
    refused: 1,
    buffered: 0,
  });
});

Deno.test("Drain logs shutdown cancellation at info, and a failure during shutdown as error", async () => {
  const { log, lines, withMsg } = captureLog();
  const channel = new BoundedChannel<string>({ capacity: 4, mode: "wait" });
  let started = false;
  const drain = new Drain({
    name: "cancel",
    channel,
    handle: async (item, signal) => {
      started = true;
      try {
        await untilAborted(signal);
      } catch (err) {
        // Wrapping keeps the abort as the cause: still shutdown. An unrelated error thrown while
        // the signal is aborted is still a failure.
        if (item === "wrapped") throw new Error("publish aborted", { cause: err });
        throw new Error("database unreachable");
      }
    },
    log,
  });
  drain.start();
  channel.tryWrite("wrapped");
  await waitFor(() => started, "wrapped item in flight");
  channel.tryWrite("unrelated");
  // The loop's item is cut off by stop(); the queued one gets the budget's signal and fails
  // once the budget aborts it.
  assert.deepEqual(await drain.stop(100), { abandoned: 2 });
  await waitFor(() => withMsg("drain item failed").length === 1, "the failure logged");

  const cancelled = withMsg("drain item cancelled by shutdown");
  assert.deepEqual(cancelled.map((l) => [l.level, l.drain]), [[levels.info, "cancel"]]);
  const failed = withMsg("drain item failed");
  assert.deepEqual(failed.map((l) => [l.level, l.drain, l.err?.message]), [
    [levels.error, "cancel", "database unreachable"],
  ]);
  assert.equal(lines.filter((l) => l.level >= levels.error).length, 1);
});

Deno.test("Drain.stop drains queued items with fresh signals once the loop returns", async () => {
  const { log, withMsg } = captureLog();
  const channel = new BoundedChannel<number>({ capacity: 16, mode: "wait" });
  const calls: { item: number; abortedAtStart: boolean }[] = [];
  const drain = new Drain({
    name: "drained",
    channel,
    handle: async (item, signal) => {
      calls.push({ item, abortedAtStart: signal.aborted });
      if (item === 1) await untilAborted(signal);
      else await delay(10, undefined, { signal });
    },
    log,
  });
  drain.start();
  for (let i = 1; i <= 6; i++) channel.tryWrite(i);
  await waitFor(() => calls.length === 1, "first item in flight");

  const startedAt = performance.now();
  const { abandoned } = await drain.stop(1_000);
  const elapsedMs = performance.now() - startedAt;
  assert.ok(elapsedMs < 500, `stop() took ${elapsedMs.toFixed(0)} ms`);
  assert.equal(abandoned, 1, "only the cut-off in-flight item is abandoned");
  assert.deepEqual(calls, [
    { item: 1, abortedAtStart: false },
    ...[2, 3, 4, 5, 6].map((item) => ({ item, abortedAtStart: false })),
  ]);
  const [stopped] = withMsg("drain stopped");
  assert.deepEqual([stopped.abandoned, stopped.drained], [1, 5]);
  assert.equal(channel.stats().buffered, 0);
});

Deno.test("Drain rate-limits dropped-item warnings to one per dropLogIntervalMs", async () => {
  const { log, withMsg } = captureLog();
  const channel = new BoundedChannel<number>({ capacity: 1, mode: "drop-oldest" });
  const intervalMs = 100;
  const drain = new Drain({
    name: "lossy",
    channel,
    handle: (_item, signal) => untilAborted(signal),
    log,
    dropLogIntervalMs: intervalMs,
  });
  drain.start();
  // At least 350 ms and 60 writes, however slow the machine: the producer is paced, not timed.
  const started = performance.now();
  let writes = 0;
  while (performance.now() - started < 350 || writes < 60) {
    channel.tryWrite(++writes);
    await delay(2); // pacing the producer, not waiting for a result
  }
  const elapsedMs = performance.now() - started;
  await drain.stop(200);

  const { dropped } = channel.stats();
  const warnings = withMsg("drain channel dropped items");
  assert.ok(dropped > 50, `only ${dropped} drops of ${writes} writes`);
  // One warning per interval at most, and at least two over 3.5 intervals of drops.
  assert.ok(
    warnings.length >= 2 && warnings.length <= Math.ceil(elapsedMs / intervalMs) + 1,
    `${warnings.length} warnings in ${Math.round(elapsedMs)} ms at ${intervalMs} ms`,
  );
  for (const w of warnings) assert.equal(w.level, levels.warn);
  for (let i = 1; i < warnings.length; i++) {
    const gapMs = warnings[i].time - warnings[i - 1].time;
    assert.ok(gapMs >= intervalMs - 10, `warnings ${gapMs} ms apart`);
  }
  // Each line carries the count since the previous one; the stop line carries the rest.
  const [stopped] = withMsg("drain stopped");
  const logged = warnings.reduce((sum, w) => sum + (w.dropped ?? 0), 0) + (stopped.dropped ?? 0);
  assert.equal(logged, dropped);
});

Deno.test("Drain whose channel completes reports its unlogged drops at once and needs no stop()", async () => {
  const { log, lines } = captureLog();
  const channel = new BoundedChannel<number>({ capacity: 1, mode: "drop-oldest" });
  const gate = Promise.withResolvers<void>();
  const drain = new Drain({
    name: "ended",
    channel,
    log,
    handle: () => gate.promise,
    dropLogIntervalMs: 3_600_000,
  });
  drain.start();
  channel.tryWrite(1); // taken by the handler, which waits on the gate
  await waitFor(() => channel.size === 0, "the first item to be taken");
  for (let i = 2; i <= 5; i++) channel.tryWrite(i); // keeps 5, drops 2, 3, 4
  channel.complete();
  gate.resolve();
  await drain.done;
  const warnings = lines.filter((l) => l.msg === "drain channel dropped items");
  assert.deepEqual(warnings.map((l) => l.dropped), [3]);
});
