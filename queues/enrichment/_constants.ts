/**
 * The enrichment queue's name and the constants its private helpers share with mod.ts, apart from
 * mod.ts so that no helper imports mod.ts back (mod.ts re-exports them).
 *
 * @module
 */
/** Queue name used in logs, events and the lock key. */
export const name = "enrichment";

/** Attempts before enrichment is `Failed` for good. */
export const MAX_ATTEMPTS = 3;
