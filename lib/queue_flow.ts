/**
 * What every consumed queue's claim, run and recovery share, written once: the control flow
 * around each queue's own statements (ADR-022 rejects a generic queue helper that takes a table
 * name; these take a queue's results and its fenced writes, never its SQL). A queue imports them
 * beside the contract in lib/queue.ts.
 *
 * @module
 */
import { type ClaimedJob, isRunTimeout, type QueueContext } from "./queue.ts";

/**
 * Thrown inside a completing transaction when its fence matched no row: the claim was lost. A
 * run's catch hands it to {@linkcode runFault}, which logs it; nothing is settled.
 */
export class ClaimLostError extends Error {
  override name = "ClaimLostError";
}

/**
 * Publish a claim's `claimed` event, with the wake latency the claim read.
 *
 * @param status the status the claim wrote (`Processing`, `Running`).
 * @param runnableForS seconds the job was runnable before the claim; null for a stale re-pick.
 */
export function publishClaimed(
  ctx: QueueContext,
  queue: string,
  status: string,
  job: ClaimedJob,
  runnableForS: number | null,
): void {
  ctx.events.publish({
    queue,
    id: job.id,
    transition: "claimed",
    status,
    attempt: job.attempt_count,
    runnableForS,
  });
}

/**
 * The job a claim statement returned, its `claimed` event published ({@linkcode publishClaimed})
 * and its wake latency column (`runnable_for_s`) taken off.
 *
 * @param row the claim's first row; absent when it claimed nothing.
 * @returns the job, or null when the claim found none.
 */
export function claimed<R extends ClaimedJob & { readonly runnable_for_s: number | null }>(
  ctx: QueueContext,
  queue: string,
  status: string,
  row: R | undefined,
): Omit<R, "runnable_for_s"> | null {
  if (!row) return null;
  const { runnable_for_s, ...job } = row;
  publishClaimed(ctx, queue, status, row, runnable_for_s);
  return job;
}

/**
 * Publish a job's `completed` event: `Completed`, at the attempt its claim counted. Call it once
 * the completing write has committed.
 */
export function publishCompleted(ctx: QueueContext, queue: string, job: ClaimedJob): void {
  ctx.events.publish({
    queue,
    id: job.id,
    transition: "completed",
    status: "Completed",
    attempt: job.attempt_count,
  });
}

/**
 * Log and publish the rows a recovery statement settled, each with the same status.
 *
 * @param rows what the statement returned: each row's id and attempt count.
 * @param status the status it wrote.
 * @param msg the warning logged for each row, with its queue and id.
 * @param error the error it wrote, when the event carries it.
 */
export function publishRecovered(
  ctx: QueueContext,
  queue: string,
  rows: readonly { readonly id: string; readonly attempt_count: number }[],
  status: string,
  msg: string,
  error?: string,
): void {
  for (const row of rows) {
    ctx.log.warn({ queue, id: row.id }, msg);
    ctx.events.publish({
      queue,
      id: row.id,
      transition: "recovered",
      status,
      attempt: row.attempt_count,
      ...(error === undefined ? {} : { error }),
    });
  }
}

/**
 * What a run's catch does first, the same in every consumed queue: a lost claim is logged and
 * settles nothing; an abort for shutdown, a lost lock or a cancel rejects with its reason
 * ({@linkcode Queue.run}); a run timeout and any other fault are the queue's to settle.
 *
 * @param err what the run threw.
 * @param signal the run's signal.
 * @returns `"lost"` (logged: settle nothing), `"timeout"` (the signal's reason is the run
 *   timeout), or `"fault"`.
 * @throws the signal's reason when it aborted for anything but the run timeout.
 */
export function runFault(
  ctx: QueueContext,
  queue: string,
  id: string,
  err: unknown,
  signal: AbortSignal,
): "lost" | "timeout" | "fault" {
  if (err instanceof ClaimLostError) {
    ctx.log.warn({ queue, id }, "completion matched no row: the claim was lost");
    return "lost";
  }
  if (signal.aborted) {
    if (!isRunTimeout(signal.reason)) throw signal.reason;
    return "timeout";
  }
  return "fault";
}

/**
 * Whether a fault is a PostgreSQL data exception (SQLSTATE class 22): the job's own input cannot
 * be stored, and a retry would only repeat the failure.
 */
export function isDataException(err: unknown): boolean {
  if (typeof err !== "object" || err === null) return false;
  const code = (err as { code?: unknown }).code;
  return typeof code === "string" && code.startsWith("22");
}

/**
 * The attempts rule for a fault that is not the job's own: under the cap the job runs again, at
 * the cap it fails, each with the reason every queue writes.
 *
 * @param detail the fault, already made safe to store (lib/job_error.ts).
 * @param settle the queue's two fenced writes: `fail` at the cap, `retry` under it, each given
 *   the reason (`attempts exhausted (n of max): …`, `attempt n of max failed, will retry: …`).
 * @returns what the write chosen returned.
 */
export async function retryUnderCap<T>(
  job: ClaimedJob,
  maxAttempts: number,
  detail: string,
  settle: { fail(reason: string): Promise<T>; retry(reason: string): Promise<T> },
): Promise<T> {
  if (job.attempt_count >= maxAttempts) {
    return await settle.fail(
      `attempts exhausted (${job.attempt_count} of ${maxAttempts}): ${detail}`,
    );
  }
  return await settle.retry(
    `attempt ${job.attempt_count} of ${maxAttempts} failed, will retry: ${detail}`,
  );
}
