/**
 * What the two host-polled queues (auto-publish, SEO backfill) share about their claim tokens: the
 * control flow of a settling write, the answer it gives, how a write that matched no row is told
 * apart (after SQS receipt handles and beanstalkd's "not reserved by you"), and the events their
 * verbs publish.
 *
 * A claim mints a fresh random `claim_token` (uuid) and stores it on the row; `complete`, `fail`
 * and `give-back` match it in their UPDATE's `where`. When that matches no row, the row is re-read:
 * settled by this same token into the status the request asks for → the stored answer again (a
 * curl retry); any other state → "no longer yours" (409), and nothing changes.
 *
 * The token is a fence, not a lease (ADR-022): nothing here reads a clock. Every statement is the
 * queue's own, passed in as a function: no table name reaches this module (ADR-022 rejects a
 * generic queue helper; each table's SQL stays in its queue's folder).
 *
 * @module
 */
import type { Sql } from "./db.ts";
import type { JobEvents, Transition } from "./events.ts";

/** A settling verb of the claim API. */
export type SettleVerb = "complete" | "fail" | "give-back";

/** The status each verb leaves the row in. */
export const SETTLED_STATUS: Readonly<Record<SettleVerb, string>> = {
  complete: "Completed",
  fail: "Failed",
  "give-back": "Queued",
};

/** The transition each verb publishes once its write committed. */
const SETTLED_TRANSITION: Readonly<Record<SettleVerb, Transition>> = {
  complete: "completed",
  fail: "failed",
  "give-back": "given_back",
};

/**
 * What a settling verb did.
 *
 * - `settled`: this request settled the job (200 with the job).
 * - `repeated`: the same token already settled it the same way; nothing changed (200, same job).
 * - `lost`: the token no longer matches (swept, recovered, retried, re-claimed or settled another
 *   way); nothing changed (409).
 * - `absent`: no job has that id (404).
 */
export type SettleOutcome<T> =
  | { outcome: "settled" | "repeated" | "lost"; job: T }
  | { outcome: "absent" };

/** The columns {@linkcode afterMiss} reads, selected alongside the job's public columns. */
export interface TokenState {
  status: string;
  claim_token: string | null;
}

/** The columns of a host-polled job that its events carry. */
export interface EventRow {
  /** bigint id, as a string. */
  id: string;
  status: string;
  attempt_count: number;
  error: string | null;
}

/**
 * Publish a host-polled job's transition. Call it only once the write has committed.
 *
 * @param queue the queue's name (its folder's name).
 * @param row the job as the write returned it.
 * @param runnableForS `claimed` only: seconds the job was runnable before the claim, from the
 *   database clock; null (or omitted) when unknown, as for a crew job.
 */
export function publishJob(
  events: JobEvents,
  queue: string,
  row: EventRow,
  transition: Transition,
  runnableForS?: number | null,
): void {
  events.publish({
    queue,
    id: row.id,
    transition,
    status: row.status,
    attempt: row.attempt_count,
    error: row.error,
    ...(transition === "claimed" ? { runnableForS: runnableForS ?? null } : {}),
  });
}

/** A host-polled queue as {@linkcode settleByToken} sees it: its name and its own re-read. */
export interface TokenQueue<T extends EventRow> {
  /** The queue's name, for the event. */
  readonly name: string;
  /**
   * The queue's read of job `id` as it is now: its public columns and its `claim_token`.
   *
   * @returns undefined when no job has that id.
   */
  reread(sql: Sql, id: string): Promise<(T & TokenState) | undefined>;
}

/**
 * Settle a claimed job by its token: run the queue's fenced write; when it settled the job,
 * publish the verb's transition; when it matched no row, re-read the row and answer with
 * {@linkcode afterMiss}. Nothing is written after a miss.
 *
 * @param ctx the pool the re-read runs on, and the event hub.
 * @param queue the queue's name and re-read.
 * @param settle the request: its verb, the job's id and the token it presented (uuid text).
 * @param fenced the queue's write, fenced on `status = 'Running'` and the token (one UPDATE, or a
 *   transaction that starts with it), committed when it resolves; it returns the settled job's
 *   public columns, or undefined/null when the fence matched no row.
 * @returns see {@linkcode SettleOutcome}.
 * @throws whatever the queue's statements throw (nothing is published then).
 */
export async function settleByToken<T extends EventRow>(
  ctx: { readonly sql: Sql; readonly events: JobEvents },
  queue: TokenQueue<T>,
  settle: { readonly verb: SettleVerb; readonly id: string; readonly token: string },
  fenced: () => Promise<T | null | undefined>,
): Promise<SettleOutcome<T>> {
  const job = await fenced();
  if (job) {
    publishJob(ctx.events, queue.name, job, SETTLED_TRANSITION[settle.verb]);
    return { outcome: "settled", job };
  }
  return afterMiss<T>(await queue.reread(ctx.sql, settle.id), settle.token, settle.verb);
}

/**
 * Decide the answer for a settle whose fenced UPDATE matched no row, from the row as it is now.
 *
 * @param row the re-read row (with its `claim_token`), or undefined when the id is unknown.
 * @param token the token the request presented (uuid text).
 * @param verb the request's verb.
 * @returns `repeated`, `lost` or `absent`; the job without its token.
 */
export function afterMiss<T extends { status: string }>(
  row: (T & TokenState) | undefined,
  token: string,
  verb: SettleVerb,
): SettleOutcome<T> {
  if (!row) return { outcome: "absent" };
  const { claim_token, ...job } = row;
  const same = claim_token === token && row.status === SETTLED_STATUS[verb];
  // `job` is the row without the one column TokenState adds to T's.
  return { outcome: same ? "repeated" : "lost", job: job as unknown as T };
}
