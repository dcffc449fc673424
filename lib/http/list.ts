/**
 * HTTP pieces every queue's operator routes share: the list query (`?status=&q=&limit=&cursor=`),
 * its opaque cursor, the bulk retry body, and the answers to a list, a cancel and a bulk retry.
 * Each queue's routes run its own statements (ADR-022: no generic layer guesses at tables); only
 * the shapes are here.
 *
 * The cursor is the last id of the page, wrapped (`base64url("id:<id>")`): lists are newest first
 * on the primary key, so jobs added while a client pages never shift the pages it has not read.
 *
 * @module
 */
import type { Context } from "hono";
import { z } from "zod";
import type { BulkRetryOutcome, CancelOutcome } from "../queue.ts";
import { BULK_RETRY_MAX } from "../queue.ts";

/**
 * A `:id` path segment: lib/http/ids.ts's one id schema (1 to 2^63 - 1, no leading zeros; past it
 * → 400 naming the range, never a database error), under the name the routes import it by.
 */
export { idString as pathId } from "./ids.ts";

/** Most jobs one list page returns. */
export const MAX_PAGE = 200;

/** The opaque cursor of the page after the one ending with job `id`. */
export function encodeCursor(id: string): string {
  return btoa(`id:${id}`).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/**
 * The id a cursor continues after.
 *
 * @returns the id, or null when `cursor` is not one this API handed out.
 */
export function decodeCursor(cursor: string): string | null {
  try {
    const text = atob(cursor.replace(/-/g, "+").replace(/_/g, "/"));
    const match = /^id:([1-9]\d{0,18})$/.exec(text);
    if (!match || BigInt(match[1]) > 9223372036854775807n) return null;
    return match[1];
  } catch {
    return null;
  }
}

const cursor = z.string().max(64).refine(
  (c) => decodeCursor(c) !== null,
  "expected the next_cursor of a previous page",
);
const limit = z.union([z.number(), z.string().regex(/^\d{1,6}$/).transform(Number)])
  .pipe(z.number().int().min(1).max(MAX_PAGE));
/** `q`: words of the job's subject (file, edition id or title, book title), any case. */
export const searchText = z.string().min(1).max(200).refine(
  (s) => !s.includes("\0"),
  "must not contain NUL",
);

/**
 * The list query of a queue with these statuses: `status`, `q`, `limit` (1..200, default 50) and
 * `cursor` (a previous page's `next_cursor`).
 */
export function listQuery<S extends readonly [string, ...string[]]>(statuses: S) {
  return z.strictObject({
    status: z.enum(statuses).optional(),
    q: searchText.optional(),
    limit: limit.default(50),
    cursor: cursor.optional(),
  });
}

/**
 * The answer to a list read with `limit + 1` rows: `{ jobs, next_cursor }`, `next_cursor` null on
 * the last page.
 */
export function listAnswer<T extends { id: string }>(
  rows: readonly T[],
  limit: number,
): { jobs: T[]; next_cursor: string | null } {
  const jobs = rows.slice(0, limit);
  const more = rows.length > limit;
  return { jobs, next_cursor: more ? encodeCursor(jobs[jobs.length - 1].id) : null };
}

/** The body of a bulk retry: the filter (`status` must be `Failed`, the one retryable status). */
export const bulkRetryBody = z.strictObject({
  status: z.literal("Failed", { error: 'only Failed jobs can be retried: expected "Failed"' }),
  q: searchText.optional(),
  /** Count the matching jobs, change nothing (the count an operator confirms). */
  dry_run: z.boolean().default(false),
});

/** The answer to a bulk retry: the outcome, with the bound. */
export function bulkRetryAnswer(c: Context, outcome: BulkRetryOutcome, dryRun: boolean): Response {
  return c.json({ ...outcome, dry_run: dryRun, limit: BULK_RETRY_MAX }, 200);
}

/**
 * The answer to a cancel: 200 the job `Failed` (cancelled); 202 the job while its run stops; 409
 * for a finished job or a running host-polled one; 404.
 *
 * @param noun names the job in the 404, e.g. "ingestion job".
 */
export function cancelAnswer<R extends { status: string | null }>(
  c: Context,
  outcome: CancelOutcome<R>,
  noun: string,
  id: string,
): Response {
  switch (outcome.outcome) {
    case "absent":
      return c.json({ error: `No such ${noun}` }, 404);
    case "cancelled":
      return c.json(outcome.job, 200);
    case "requested":
      return c.json({ ...outcome.job, cancel: "requested: the run is stopping" }, 202);
    case "running_host":
      return c.json({
        error: `Cannot cancel ${noun} ${id}: it is ${outcome.job.status} on the host, whose ` +
          "step may already have acted; let it settle, then retry or leave it",
        status: outcome.job.status,
      }, 409);
    case "finished":
      return c.json({
        error: `Cannot cancel ${noun} ${id}: it is ${outcome.job.status} already`,
        status: outcome.job.status,
      }, 409);
  }
}

/** The responses a cancel route documents (lib/http/openapi.ts). */
export const CANCEL_RESPONSES = {
  200: "The job, now Failed (cancelled by admin)",
  202: "The job, still running: its run was asked to stop and will settle as cancelled",
  404: "No such job",
  409: "The job is finished, or a host-polled job is Running (its step may have acted)",
} as const;

/** The responses a bulk retry route documents. */
export const BULK_RETRY_RESPONSES = {
  200: "`{ matched, retried, skipped, truncated, ids, dry_run, limit }`",
  400: 'The body is not `{ status: "Failed", q?, dry_run? }` (`error` names the field)',
  415: "Content-Type is not application/json",
} as const;

/** The responses a list route documents. */
export const LIST_RESPONSES = {
  200: "`{ jobs, next_cursor }`, newest first; `next_cursor` is null on the last page",
} as const;
