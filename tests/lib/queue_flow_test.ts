/**
 * lib/queue_flow.ts on its own: what a run's catch decides ({@linkcode runFault}), the attempts
 * cap ({@linkcode retryUnderCap}) and which faults are the job's own data ({@linkcode isDataException}).
 * The queues' tests run them against real PostgreSQL; these pin the decisions at their edges.
 *
 * @module
 */
import assert from "node:assert/strict";
import { ClaimLostError, isDataException, retryUnderCap, runFault } from "../../lib/queue_flow.ts";
import type { QueueContext } from "../../lib/queue.ts";
import type { JobEvent } from "../../lib/events.ts";

function context() {
  const warnings: unknown[] = [];
  const events: JobEvent[] = [];
  const log = { warn: (obj: unknown, msg: string) => warnings.push([obj, msg]) };
  const ctx = {
    sql: null,
    log,
    bootId: "boot",
    events: { publish: (e: JobEvent) => events.push(e) },
  } as unknown as QueueContext;
  return { ctx, warnings, events };
}

Deno.test("runFault(): a lost claim is logged and settles nothing; a timeout and a fault are the queue's; any other abort rethrows its reason", () => {
  const { ctx, warnings } = context();
  const live = new AbortController().signal;
  assert.equal(runFault(ctx, "q", "7", new ClaimLostError("x"), live), "lost");
  assert.deepEqual(warnings, [[
    { queue: "q", id: "7" },
    "completion matched no row: the claim was lost",
  ]]);
  assert.equal(runFault(ctx, "q", "7", new Error("boom"), live), "fault");
  const timedOut = AbortSignal.abort(new DOMException("slow", "TimeoutError"));
  assert.equal(runFault(ctx, "q", "7", new Error("aborted"), timedOut), "timeout");
  const shutdown = new Error("shutting down");
  assert.throws(
    () => runFault(ctx, "q", "7", new Error("aborted"), AbortSignal.abort(shutdown)),
    (err) => err === shutdown,
  );
});

Deno.test("retryUnderCap(): under the cap the job runs again, at the cap it fails, each with its reason", async () => {
  const settle = {
    fail: (reason: string) => Promise.resolve(`fail: ${reason}`),
    retry: (reason: string) => Promise.resolve(`retry: ${reason}`),
  };
  const job = (attempt_count: number) => ({ id: "1", attempt_count });
  assert.equal(
    await retryUnderCap(job(2), 3, "reset", settle),
    "retry: attempt 2 of 3 failed, will retry: reset",
  );
  assert.equal(
    await retryUnderCap(job(3), 3, "reset", settle),
    "fail: attempts exhausted (3 of 3): reset",
  );
});

Deno.test("isDataException(): SQLSTATE class 22 only, and any thrown value is read safely", () => {
  assert.equal(isDataException(Object.assign(new Error("x"), { code: "22P05" })), true);
  assert.equal(isDataException(Object.assign(new Error("x"), { code: "23505" })), false);
  for (const thrown of [undefined, null, "22", 22, { code: 22 }]) {
    assert.equal(isDataException(thrown), false);
  }
});
