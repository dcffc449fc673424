/**
 * The outbox drain: post-commit effects that survive an unknown commit outcome. A state change
 * records its effect as a row of `outbox` (sql/013_outbox.sql) in its own transaction, so the
 * effect exists exactly when the change committed — a lost COMMIT answer, a crash right after the
 * commit or a retry of the request cannot skip it — and this drain delivers it after the commit.
 *
 * - One instance delivers: the drain runs under its own advisory lock (lib/lock.ts, key
 *   `textstack:consumer:<schema>.outbox`); a process that does not hold it stands by, and the
 *   rows it reads are fenced on the lock (`claimFence`), so a lock lost mid-round reads nothing.
 * - At least once: a row is marked delivered only after its handler returned; a crash between
 *   the two delivers it again. A handler's fault is tried again with backoff (1 s doubling to 1 h).
 * - De-duplicated: `(kind, dedup_key)` is unique and a record of a key already there is dropped,
 *   so one effect (an IndexNow ping per edition and version) is delivered once, however often its
 *   change is retried. Delivered rows are kept: they are the de-duplication.
 * - Woken by the insert's NOTIFY on `<schema>.outbox` and by its own poll.
 *
 * Plumbing, not a queue: it has no status names, no admin retry and no place in the queue list
 * (ADR-052's post-commit rule, made durable).
 *
 * @module
 */
import { setTimeout as sleep } from "node:timers/promises";
import type { Fragment, Sql, TxSql } from "./db.ts";
import type { Logger } from "./log.ts";
import type { Wake } from "./wake.ts";

/** Delivers one effect's payload; throws to be tried again later. */
export type OutboxHandler = (
  payload: Record<string, unknown>,
  signal: AbortSignal,
) => Promise<void>;

/** The lock the drain holds while it delivers (a `QueueLock`). */
export interface OutboxLock {
  readonly held: boolean;
  readonly lost: AbortSignal;
  tryAcquire(): Promise<boolean>;
  release(): Promise<void>;
  claimFence(sql: Sql | TxSql): Fragment;
}

/** Options for {@linkcode OutboxDrain}. */
export interface OutboxDrainOptions {
  readonly sql: Sql;
  readonly log: Logger;
  readonly lock: OutboxLock;
  /** Fed by NOTIFY on `<schema>.outbox`. */
  readonly wake: Wake;
  /** By kind; rows of other kinds are left alone. */
  readonly handlers: Readonly<Record<string, OutboxHandler>>;
  /** Poll period, in ms (default 5000). */
  readonly pollIntervalMs?: number;
  /** Wait before trying the lock again while another process holds it, in ms (default 1000). */
  readonly standbyRetryMs?: number;
}

/** Rows delivered per round. */
const BATCH = 20;
/** Longest backoff of a failing row, in ms. */
export const MAX_BACKOFF_MS = 3_600_000;

/**
 * Record an effect in the caller's transaction: delivered after it commits, never if it rolls
 * back; dropped when `(kind, key)` is already recorded.
 *
 * @param key the de-duplication key within `kind`.
 * @returns how many rows were recorded (0: a duplicate).
 */
export async function recordEffect(
  sql: Sql | TxSql,
  kind: string,
  key: string,
  payload: Record<string, unknown>,
): Promise<number> {
  const rows = await sql`
    insert into outbox (kind, dedup_key, payload) values (${kind}, ${key}, ${
    sql.json(payload as never)
  })
    on conflict (kind, dedup_key) do nothing`;
  return rows.count;
}

/** The hosted drain: start once, stop at shutdown. */
export class OutboxDrain {
  readonly #o: OutboxDrainOptions;
  readonly #stop = new AbortController();
  #loop: Promise<void> | undefined;
  #delivered = 0;
  #failures = 0;

  constructor(options: OutboxDrainOptions) {
    this.#o = options;
  }

  /** Effects delivered by this process so far. */
  get delivered(): number {
    return this.#delivered;
  }

  /** Failed delivery tries so far (each is tried again). */
  get failures(): number {
    return this.#failures;
  }

  /** Start the loop: take the lock (or stand by), deliver what is due, wait for a wake. */
  start(): void {
    this.#loop ??= this.#run();
  }

  /**
   * Stop: the delivery in flight is aborted (it is tried again by the next holder, at least
   * once), the lock released.
   *
   * @param budgetMs longest wait for the loop to end.
   */
  async stop(budgetMs = 5000): Promise<void> {
    this.#stop.abort(new Error("Shutting down"));
    if (this.#loop) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([this.#loop, new Promise((r) => (timer = setTimeout(r, budgetMs)))]);
      clearTimeout(timer);
    }
    await this.#o.lock.release();
  }

  /**
   * Deliver the due rows (at most one batch), while the lock is held.
   *
   * @returns how many were delivered and how many failed this round.
   */
  async deliverDue(signal: AbortSignal): Promise<{ delivered: number; failed: number }> {
    const { sql, log, handlers, lock } = this.#o;
    const kinds = Object.keys(handlers);
    const due = await sql<
      {
        id: string;
        kind: string;
        dedup_key: string;
        payload: Record<string, unknown>;
        attempt_count: number;
      }[]
    >`
      select id, kind, dedup_key, payload, attempt_count from outbox
      where ${lock.claimFence(sql)} and delivered_at is null and next_attempt_at <= now()
        and kind = any(${kinds}::text[])
      order by id
      limit ${BATCH}`;
    let delivered = 0;
    let failed = 0;
    for (const row of due) {
      if (signal.aborted) break;
      try {
        await handlers[row.kind](row.payload, signal);
      } catch (err) {
        if (signal.aborted) break;
        failed++;
        const detail = err instanceof Error ? err.message : String(err);
        const backoff = Math.min(MAX_BACKOFF_MS, 1000 * 2 ** Math.min(row.attempt_count, 22));
        await sql`
          update outbox
          set attempt_count = attempt_count + 1, last_error = ${detail},
              next_attempt_at = now() + ${backoff} * interval '1 millisecond'
          where id = ${row.id}`;
        this.#failures++;
        log.warn(
          { outbox: row.kind, key: row.dedup_key, err: detail, retryMs: backoff },
          "outbox delivery failed; will try again",
        );
        continue;
      }
      await sql`
        update outbox set attempt_count = attempt_count + 1, last_error = null,
                          delivered_at = now()
        where id = ${row.id} and delivered_at is null`;
      delivered++;
      this.#delivered++;
      log.info({ outbox: row.kind, key: row.dedup_key }, "outbox effect delivered");
    }
    return { delivered, failed };
  }

  async #run(): Promise<void> {
    const { log, lock, wake } = this.#o;
    const stop = this.#stop.signal;
    const idle = async (ms: number) => {
      await sleep(ms, undefined, { signal: stop }).catch(() => {});
    };
    while (!stop.aborted) {
      if (!lock.held) {
        const took = await lock.tryAcquire().catch((err) => {
          log.warn({ err: String(err?.message ?? err) }, "outbox lock unavailable");
          return false;
        });
        if (!took) {
          await idle(this.#o.standbyRetryMs ?? 1000);
          continue;
        }
        log.info("outbox drain holds its lock");
      }
      const round = AbortSignal.any([stop, lock.lost]);
      let full = false;
      try {
        const { delivered, failed } = await this.deliverDue(round);
        full = delivered + failed === BATCH;
      } catch (err) {
        if (stop.aborted) break;
        log.warn({ err: String((err as Error)?.message ?? err) }, "outbox round failed");
        await idle(1000);
        continue;
      }
      if (full) continue;
      const tick = AbortSignal.any([round, AbortSignal.timeout(this.#o.pollIntervalMs ?? 5000)]);
      await wake.wait(tick);
    }
  }
}
