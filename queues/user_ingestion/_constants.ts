/**
 * The user ingestion queue's name and the constants its private helpers share with mod.ts, apart from
 * mod.ts so that no helper imports mod.ts back (mod.ts re-exports them).
 *
 * @module
 */
/** Queue name used in logs, events and the lock key. */
export const name = "user_ingestion";

/** Attempts before a job is `Failed` for good (ADR-022 row 2: 3). */
export const MAX_ATTEMPTS = 3;

/** The reader's message when attempts ran out for a reason that is not the file's. */
export const INTERRUPTED_MESSAGE =
  "We could not finish processing this file. Please try again later.";
