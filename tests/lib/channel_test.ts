/**
 * BoundedChannel (ADR-052): each full mode against a paused reader, complete() and end-of-stream,
 * the single-reader rule, and exact accounting under randomized close-while-reading races.
 *
 * @module
 */
import assert from "node:assert/strict";
import { setImmediate } from "node:timers";
import { BoundedChannel, type FullMode } from "../../lib/channel.ts";

function nextMacrotask(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

// Track whether a promise has settled without awaiting it.
function watch<T>(promise: Promise<T>): { settled: () => boolean } {
  let settled = false;
  promise.then(() => settled = true, () => settled = true);
  return { settled: () => settled };
}

function readAll<T>(channel: BoundedChannel<T>): T[] {
  const items: T[] = [];
  for (let r = channel.tryRead(); r.ok; r = channel.tryRead()) items.push(r.value);
  return items;
}

// A reader that is waiting when writes start, wakes on the first item, and then stays paused
// until resumed: the shape of a drain stuck on a slow item.
function pausedReader<T>(channel: BoundedChannel<T>): { resume: () => Promise<T[]> } {
  let open!: () => void;
  const gate = new Promise<void>((resolve) => open = resolve);
  const done = (async () => {
    const items: T[] = [];
    while (await channel.waitToRead()) {
      await gate;
      items.push(...readAll(channel));
    }
    return items;
  })();
  return {
    resume: () => {
      open();
      return done;
    },
  };
}

async function fillWithPausedReader(mode: FullMode) {
  const dropped: number[] = [];
  const channel = new BoundedChannel<number>({
    capacity: 4,
    mode,
    onDropped: (item) => dropped.push(item),
  });
  const reader = pausedReader(channel);
  const results: boolean[] = [];
  for (let i = 1; i <= 10; i++) results.push(await channel.write(i));
  channel.complete();
  const delivered = await reader.resume();
  return { channel, dropped, results, delivered };
}

Deno.test("BoundedChannel rejects a capacity that is not a positive integer", () => {
  for (const capacity of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
    assert.throws(
      () => new BoundedChannel({ capacity, mode: "wait", name: "jobs" }),
      (err: unknown) =>
        err instanceof RangeError &&
        err.message ===
          `Cannot create channel "jobs": expected capacity to be a positive integer, received ${capacity}`,
    );
  }
  assert.throws(
    () => new BoundedChannel({ capacity: 1, mode: "drop-everything" as FullMode }),
    RangeError,
  );
});

const dropCases = [
  {
    name: "BoundedChannel drop-oldest keeps the newest items and counts drops",
    mode: "drop-oldest",
    delivered: [7, 8, 9, 10],
    dropped: [1, 2, 3, 4, 5, 6],
  },
  {
    name: "BoundedChannel drop-newest evicts the newest buffered item for each new one",
    mode: "drop-newest",
    delivered: [1, 2, 3, 10],
    dropped: [4, 5, 6, 7, 8, 9],
  },
  {
    name: "BoundedChannel drop-write discards incoming items while full",
    mode: "drop-write",
    delivered: [1, 2, 3, 4],
    dropped: [5, 6, 7, 8, 9, 10],
  },
] as const;

for (const expected of dropCases) {
  Deno.test(expected.name, async () => {
    const { channel, dropped, results, delivered } = await fillWithPausedReader(expected.mode);
    // A drop-mode write reports success even when it drops (ADR-052).
    assert.deepEqual(results, Array(10).fill(true));
    assert.deepEqual(delivered, expected.delivered);
    assert.deepEqual(dropped, expected.dropped);
    assert.deepEqual(channel.stats(), {
      attempted: 10,
      delivered: 4,
      dropped: 6,
      refused: 0,
      buffered: 0,
    });
  });
}

Deno.test("BoundedChannel wait refuses tryWrite when full and parks write until a read", async () => {
  const dropped: number[] = [];
  const channel = new BoundedChannel<number>({
    capacity: 4,
    mode: "wait",
    onDropped: (item) => dropped.push(item),
  });
  const tried: boolean[] = [];
  for (let i = 1; i <= 10; i++) tried.push(channel.tryWrite(i));
  assert.deepEqual(tried, [true, true, true, true, false, false, false, false, false, false]);
  assert.deepEqual(channel.stats(), {
    attempted: 10,
    delivered: 0,
    dropped: 0,
    refused: 6,
    buffered: 4,
  });

  const parked = channel.write(5);
  const parkedState = watch(parked);
  await nextMacrotask();
  await nextMacrotask();
  assert.equal(parkedState.settled(), false, "write(5) settled while the channel was full");
  assert.equal(channel.size, 4);

  assert.deepEqual(channel.tryRead(), { ok: true, value: 1 });
  assert.equal(await parked, true);
  assert.equal(channel.tryWrite(6), false, "a read's room went to the parked writer first");
  assert.deepEqual(readAll(channel), [2, 3, 4, 5]);
  assert.deepEqual(dropped, []);
  assert.deepEqual(channel.stats(), {
    attempted: 12,
    delivered: 5,
    dropped: 0,
    refused: 7,
    buffered: 0,
  });
});

Deno.test("BoundedChannel.complete releases parked writers at once and refuses later writes", async () => {
  const channel = new BoundedChannel<number>({ capacity: 2, mode: "wait" });
  assert.equal(channel.tryWrite(1), true);
  assert.equal(channel.tryWrite(2), true);
  const parked = [channel.write(3), channel.write(4)];
  const states = parked.map(watch);
  await nextMacrotask();
  assert.deepEqual(states.map((s) => s.settled()), [false, false]);

  const startedAt = performance.now();
  channel.complete();
  const released = await Promise.all(parked);
  const elapsedMs = performance.now() - startedAt;
  assert.ok(elapsedMs < 10, `parked writers released after ${elapsedMs.toFixed(2)} ms`);
  assert.deepEqual(released, [false, false]);
  assert.equal(channel.completed, true);

  assert.equal(channel.tryWrite(5), false);
  assert.equal(await channel.write(6), false);
  channel.complete();
  assert.deepEqual(channel.stats(), {
    attempted: 6,
    delivered: 0,
    dropped: 0,
    refused: 4,
    buffered: 2,
  });
});

Deno.test("BoundedChannel drop modes refuse writes after complete instead of dropping", () => {
  const dropped: number[] = [];
  const channel = new BoundedChannel<number>({
    capacity: 1,
    mode: "drop-oldest",
    onDropped: (item) => dropped.push(item),
  });
  channel.tryWrite(1);
  channel.complete();
  assert.equal(channel.tryWrite(2), false);
  assert.deepEqual(dropped, []);
  assert.deepEqual(readAll(channel), [1]);
  assert.deepEqual(channel.stats(), {
    attempted: 2,
    delivered: 1,
    dropped: 0,
    refused: 1,
    buffered: 0,
  });
});

Deno.test("BoundedChannel reader sees end-of-stream once, after the buffered items", async () => {
  const channel = new BoundedChannel<number>({ capacity: 4, mode: "wait" });
  const events: (number | "end")[] = [];
  const reader = (async () => {
    while (await channel.waitToRead()) events.push(...readAll(channel));
    events.push("end");
    assert.equal(channel.stats().buffered, 0, "end-of-stream while items were buffered");
  })();
  channel.tryWrite(1);
  await nextMacrotask();
  channel.tryWrite(2);
  channel.tryWrite(3);
  channel.complete();
  await reader;
  assert.deepEqual(events, [1, 2, 3, "end"]);
  assert.equal(await channel.waitToRead(), false, "end-of-stream is final");
  assert.deepEqual(channel.tryRead(), { ok: false });

  const iterated = new BoundedChannel<number>({ capacity: 4, mode: "drop-write" });
  iterated.tryWrite(1);
  iterated.tryWrite(2);
  iterated.complete();
  const seen: number[] = [];
  for await (const item of iterated) seen.push(item);
  assert.deepEqual(seen, [1, 2]);
  assert.deepEqual(iterated.stats(), {
    attempted: 2,
    delivered: 2,
    dropped: 0,
    refused: 0,
    buffered: 0,
  });
});

Deno.test("BoundedChannel.waitToRead throws on a second concurrent reader", async () => {
  const channel = new BoundedChannel<number>({ capacity: 1, mode: "wait", name: "jobs" });
  const first = channel.waitToRead();
  assert.throws(() => channel.waitToRead(), /Cannot wait to read channel "jobs": another read/);
  channel.complete();
  assert.equal(await first, false);
});

Deno.test("BoundedChannel.waitToRead rejects with the signal's reason and frees the reader", async () => {
  const channel = new BoundedChannel<number>({ capacity: 1, mode: "wait" });
  const controller = new AbortController();
  const reason = new Error("reader stopping");
  const waiting = channel.waitToRead(controller.signal);
  controller.abort(reason);
  await assert.rejects(waiting, (err) => err === reason);
  await assert.rejects(channel.waitToRead(controller.signal), (err) => err === reason);

  channel.tryWrite(1);
  assert.equal(await channel.waitToRead(), true);
  assert.deepEqual(channel.tryRead(), { ok: true, value: 1 });
});

Deno.test("BoundedChannel.tryRead tells an undefined item from an empty channel", () => {
  const channel = new BoundedChannel<number | undefined>({ capacity: 2, mode: "wait" });
  assert.deepEqual(channel.tryRead(), { ok: false });
  channel.tryWrite(undefined);
  assert.equal(channel.size, 1);
  assert.deepEqual(channel.tryRead(), { ok: true, value: undefined });
  assert.deepEqual(channel.tryRead(), { ok: false });
});

// Deterministic, so a failing run can be replayed from its index.
function mulberry32(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const modes: readonly FullMode[] = ["wait", "drop-oldest", "drop-newest", "drop-write"];

async function raceOnce(run: number): Promise<void> {
  const random = mulberry32(0x5eed + run);
  const int = (n: number): number => Math.floor(random() * n);
  // A mix of microtask and macrotask gaps, so writes, reads, aborts and complete() interleave in
  // every order the event loop allows.
  const pause = async (): Promise<void> => {
    const r = random();
    if (r < 0.3) return;
    if (r < 0.7) { for (let i = int(4); i >= 0; i--) await Promise.resolve(); }
    else await nextMacrotask();
  };
  const at = `run ${run}`;

  const capacity = 1 + int(4);
  const mode = modes[int(modes.length)];
  const dropped: number[] = [];
  const channel = new BoundedChannel<number>({
    capacity,
    mode,
    onDropped: (item) => dropped.push(item),
  });
  const balanced = (): void => {
    const s = channel.stats();
    assert.equal(s.delivered + s.dropped + s.refused + s.buffered, s.attempted, at);
  };

  let issued = 0;
  const refused: number[] = [];
  const delivered: number[] = [];
  let ends = 0;
  const background: Promise<void>[] = [];

  const producer = async (): Promise<void> => {
    for (let n = int(8); n >= 0; n--) {
      const id = ++issued;
      const accepted = random() < 0.5 ? channel.tryWrite(id) : await channel.write(id);
      if (!accepted) refused.push(id);
      balanced();
      await pause();
    }
  };
  const closer = async (): Promise<void> => {
    for (let n = int(6); n >= 0; n--) await pause();
    channel.complete();
    balanced();
    if (random() < 0.2) channel.complete();
  };
  const reader = async (): Promise<void> => {
    if (random() < 0.3) {
      for await (const item of channel) {
        delivered.push(item);
        balanced();
        await pause();
      }
    } else {
      for (;;) {
        const controller = random() < 0.2 ? new AbortController() : undefined;
        const reason = new Error("abort");
        if (controller) {
          background.push((async () => {
            await pause();
            controller.abort(reason);
          })());
        }
        let available: boolean;
        try {
          available = await channel.waitToRead(controller?.signal);
        } catch (err) {
          assert.equal(err, reason, at);
          continue;
        }
        if (!available) break;
        for (let n = 1 + int(capacity + 1); n > 0; n--) {
          const r = channel.tryRead();
          if (!r.ok) break;
          delivered.push(r.value);
          balanced();
          if (random() < 0.3) await pause();
        }
        await pause();
      }
    }
    ends++;
    assert.equal(channel.stats().buffered, 0, `${at}: end-of-stream with items buffered`);
  };

  const producers = Array.from({ length: 1 + int(3) }, producer);
  await Promise.all([reader(), closer(), ...producers]);
  await Promise.all(background);

  const s = channel.stats();
  assert.equal(ends, 1, at);
  assert.equal(s.buffered, 0, at);
  assert.equal(s.attempted, issued, at);
  assert.equal(s.delivered + s.dropped + s.refused, s.attempted, at);
  assert.equal(s.delivered, delivered.length, at);
  assert.equal(s.dropped, dropped.length, at);
  assert.equal(s.refused, refused.length, at);
  // Every id went exactly one way, and the reader saw ids in write order.
  const outcomes = [...delivered, ...dropped, ...refused].sort((a, b) => a - b);
  assert.deepEqual(outcomes, Array.from({ length: issued }, (_, i) => i + 1), at);
  for (let i = 1; i < delivered.length; i++) {
    assert.ok(delivered[i - 1] < delivered[i], `${at}: out of order ${delivered}`);
  }
}

Deno.test("BoundedChannel keeps exact accounting over 10,000 randomized close-while-reading runs", async () => {
  const unhandled: unknown[] = [];
  const onUnhandled = (event: PromiseRejectionEvent): void => {
    event.preventDefault();
    unhandled.push(event.reason);
  };
  globalThis.addEventListener("unhandledrejection", onUnhandled);
  try {
    const startedAt = performance.now();
    for (let run = 0; run < 10_000; run++) await raceOnce(run);
    const elapsedMs = performance.now() - startedAt;
    assert.ok(elapsedMs < 10_000, `10,000 runs took ${elapsedMs.toFixed(0)} ms`);
    // unhandledrejection is dispatched after the microtask queue drains; give it two turns.
    await nextMacrotask();
    await nextMacrotask();
    assert.deepEqual(unhandled, []);
  } finally {
    globalThis.removeEventListener("unhandledrejection", onUnhandled);
  }
});
