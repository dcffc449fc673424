/**
 * The ingestion queue's name and the constants its private helpers share with mod.ts, apart from
 * mod.ts so that no helper imports mod.ts back (mod.ts re-exports them).
 *
 * @module
 */
/** Queue name used in logs, events and the lock key. */
export const name = "ingestion";

/** Attempts before a job is `Failed` for good (ADR-022: "3, then Failed"). */
export const MAX_ATTEMPTS = 3;
