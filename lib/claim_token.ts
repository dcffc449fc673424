/**
 * What the two host-polled queues (auto-publish, SEO backfill) share about their claim tokens: the
 * answer a settling write gives, and how a write that matched no row is told apart (after
 * SQS receipt handles and beanstalkd's "not reserved by you").
 *
 * A claim mints a fresh random `claim_token` (uuid) and stores it on the row; `complete`, `fail`
 * and `give-back` match it in their UPDATE's `where`. When that matches no row, the row is re-read:
 * settled by this same token into the status the request asks for → the stored answer again (a
 * curl retry); any other state → "no longer yours" (409), and nothing changes.
 *
 * @module
 */

/** A settling verb of the claim API. */
export type SettleVerb = "complete" | "fail" | "give-back";

/** The status each verb leaves the row in. */
export const SETTLED_STATUS: Readonly<Record<SettleVerb, string>> = {
  complete: "Completed",
  fail: "Failed",
  "give-back": "Queued",
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

/**
 * Decide the answer for a settle whose fenced UPDATE matched no row, from the row as it is now.
 *
 * @param row the re-read row (with its `claim_token`), or undefined when the id is unknown.
 * @param token the token the request presented (uuid text).
 * @param verb the request's verb.
 * @returns `repeated`, `lost` or `absent`; the job without its token.
 */
export function afterMiss<T extends TokenState>(
  row: T | undefined,
  token: string,
  verb: SettleVerb,
): SettleOutcome<Omit<T, "claim_token">> {
  if (!row) return { outcome: "absent" };
  const { claim_token, ...job } = row;
  const same = claim_token === token && row.status === SETTLED_STATUS[verb];
  return { outcome: same ? "repeated" : "lost", job };
}
