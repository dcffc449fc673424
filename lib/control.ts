/**
 * Operator control of the queues across every instance on one database: pauses and cancel
 * requests.
 *
 * - A pause is a row of `queue_pauses` (sql/012_operations.sql), so it is persisted and survives
 *   restarts. Its trigger announces every change on the channel `<schema>.queue_control` as
 *   `{"pause": "<queue>"}`; each instance's {@linkcode QueueControl} re-reads the table then (and
 *   on every re-listen, and every `refreshMs` in case a notification was lost), so a pause takes
 *   effect on every instance within the NOTIFY's delivery. A paused in-process consumer keeps its
 *   lock, finishes its current job and claims nothing more (lib/consumer.ts `paused`); the
 *   host-polled queues' claim statements read the table themselves.
 * - A cancel request of a running in-process job is `{"cancel": "<queue>", "id": "<id>"}` on the
 *   same channel: whichever instance runs the job (the lock holder) aborts that run, and its
 *   consumer settles it as cancelled with a fenced write (lib/consumer.ts `cancel`). A request
 *   that no instance is running finds nothing and changes nothing.
 *
 * - What every queue's admin cancel and retry share (each passes its own statements): the cancel
 *   flow ({@linkcode cancelJob}) and the events a cancel or a retry publishes after its commit
 *   ({@linkcode publishRetried}, {@linkcode bulkRetried}).
 *
 * No table of a queue is named here: pauses and requests are keyed by queue name.
 *
 * @module
 */
import type { Sql } from "./db.ts";
import type { Logger } from "./log.ts";
import type { ChannelHandler } from "./listener.ts";
import type { JobEvents } from "./events.ts";
import type { BulkRetryOutcome, CancelOutcome } from "./queue.ts";
import { bulkOutcome, CANCELLED } from "./queue.ts";

/** Options for {@linkcode QueueControl}. */
export interface QueueControlOptions {
  sql: Sql;
  /** The schema: the channel is `<schema>.queue_control`. */
  schema: string;
  log: Logger;
  /** How often (ms) the pauses are re-read without a notification (default 5000). */
  refreshMs?: number;
}

/** A queue's pause, as the API shows it. */
export interface PauseState {
  readonly queue: string;
  readonly paused: boolean;
  /** When it was paused; null when it runs. */
  readonly paused_at: Date | null;
}

/**
 * This instance's view of the pauses, and the sender and receiver of cancel requests.
 *
 * @example
 * const control = new QueueControl({ sql, schema, log });
 * await listener.listen(control.channel, control.handler);
 * await control.start();
 * control.paused("ingestion"); // false
 * await control.pause("ingestion"); // every instance stops claiming ingestion jobs
 */
export class QueueControl {
  readonly #o: QueueControlOptions;
  #paused = new Map<string, Date>();
  readonly #pauseListeners = new Set<(queue: string, paused: boolean) => void>();
  readonly #cancelHandlers = new Map<string, (id: string) => boolean>();
  #timer: ReturnType<typeof setInterval> | undefined;
  #refreshing: Promise<void> | undefined;

  constructor(options: QueueControlOptions) {
    this.#o = options;
  }

  /** The NOTIFY channel: `<schema>.queue_control`. */
  get channel(): string {
    return `${this.#o.schema}.queue_control`;
  }

  /** What the listener hands this channel's notifications to (lib/listener.ts). */
  get handler(): ChannelHandler {
    return {
      notify: (payload) => this.#receive(payload),
      relisten: () => void this.refresh(),
    };
  }

  /** Read the pauses now, then every `refreshMs`. */
  async start(): Promise<void> {
    await this.refresh();
    this.#timer ??= setInterval(() => void this.refresh(), this.#o.refreshMs ?? 5000);
    Deno.unrefTimer(this.#timer);
  }

  /** Stop the periodic re-read. */
  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** Whether `queue` is paused, as this instance last read it. */
  paused(queue: string): boolean {
    return this.#paused.has(queue);
  }

  /** Every queue's pause, for `/readyz`, `/internal/queues` and the dashboard. */
  state(queue: string): PauseState {
    const at = this.#paused.get(queue);
    return { queue, paused: at !== undefined, paused_at: at ?? null };
  }

  /** Called with (queue, paused) whenever a re-read finds a queue's pause changed. */
  onPauseChange(listener: (queue: string, paused: boolean) => void): () => void {
    this.#pauseListeners.add(listener);
    return () => this.#pauseListeners.delete(listener);
  }

  /**
   * Route cancel requests of `queue` to `handler` (its consumer's `cancel`).
   *
   * @param handler returns whether the job was running here.
   */
  onCancel(queue: string, handler: (id: string) => boolean): void {
    this.#cancelHandlers.set(queue, handler);
  }

  /**
   * Pause a queue (persisted; every instance stops claiming its jobs). Pausing a paused queue
   * keeps its first `paused_at`.
   *
   * @returns the queue's pause after the write.
   */
  async pause(queue: string): Promise<PauseState> {
    await this.#o.sql`
      insert into queue_pauses (queue) values (${queue}) on conflict (queue) do nothing`;
    await this.refresh();
    this.#o.log.info({ queue }, "queue paused");
    return this.state(queue);
  }

  /** Resume a paused queue (a no-op for a running one). */
  async resume(queue: string): Promise<PauseState> {
    await this.#o.sql`delete from queue_pauses where queue = ${queue}`;
    await this.refresh();
    this.#o.log.info({ queue }, "queue resumed");
    return this.state(queue);
  }

  /** Re-read every pause; concurrent calls share one read. A failed read keeps the last. */
  refresh(): Promise<void> {
    this.#refreshing ??= this.#refresh().finally(() => (this.#refreshing = undefined));
    return this.#refreshing;
  }

  /**
   * Ask whichever instance runs job `id` of `queue` to stop it and settle it as cancelled: a
   * NOTIFY, which this instance receives too.
   */
  async requestCancel(queue: string, id: string): Promise<void> {
    await this.#o.sql`
      select pg_notify(${this.channel}, ${JSON.stringify({ cancel: queue, id })})`;
  }

  async #refresh(): Promise<void> {
    let rows: { queue: string; paused_at: Date }[];
    try {
      rows = await this.#o.sql<{ queue: string; paused_at: Date }[]>`
        select queue, paused_at from queue_pauses`;
    } catch (err) {
      this.#o.log.warn({ err: String(err) }, "cannot read the queue pauses; keeping the last");
      return;
    }
    const next = new Map(rows.map((r) => [r.queue, r.paused_at]));
    const changed = new Set<string>();
    for (const queue of new Set([...next.keys(), ...this.#paused.keys()])) {
      if (next.has(queue) !== this.#paused.has(queue)) changed.add(queue);
    }
    this.#paused = next;
    for (const queue of changed) {
      for (const listener of this.#pauseListeners) listener(queue, next.has(queue));
    }
  }

  #receive(payload: string): void {
    let message: { pause?: unknown; cancel?: unknown; id?: unknown };
    try {
      message = JSON.parse(payload);
    } catch {
      return;
    }
    if (typeof message.pause === "string") void this.refresh();
    if (typeof message.cancel === "string" && typeof message.id === "string") {
      const running = this.#cancelHandlers.get(message.cancel)?.(message.id) ?? false;
      if (running) {
        this.#o.log.info({ queue: message.cancel, id: message.id }, "cancelling a running job");
      }
    }
  }
}

/** How long (ms) a cancel of a running job waits for its run to settle before answering. */
export const CANCEL_WAIT_MS = 5000;

/**
 * Publish a job's `cancelled` event: `Failed` with {@linkcode CANCELLED}, at its attempt count.
 * Call it once the cancel has committed.
 */
export function publishCancelled(
  events: JobEvents,
  queue: string,
  id: string,
  attempt: number,
): void {
  events.publish({
    queue,
    id,
    transition: "cancelled",
    status: "Failed",
    attempt,
    error: CANCELLED,
  });
}

/**
 * Publish an admin retry's `retried` event: the job runnable again (`status`: the queue's
 * runnable status), attempts reset to 0. Call it once the retry has committed.
 */
export function publishRetried(
  events: JobEvents,
  queue: string,
  id: string,
  status = "Queued",
): void {
  events.publish({ queue, id, transition: "retried", status, attempt: 0 });
}

/** What a queue's bulk retry statement returns: the matching jobs counted, and the ids re-queued. */
export interface BulkRetryRow {
  matched: number;
  ids: string[];
}

/**
 * A bulk retry's outcome after its statement committed: one `retried` event per re-queued id
 * ({@linkcode publishRetried}), and the counts (lib/queue.ts `bulkOutcome`).
 *
 * @param status the queue's runnable status (`Queued`; enrichment's `Pending`).
 */
export function bulkRetried(
  events: JobEvents,
  queue: string,
  row: BulkRetryRow,
  dryRun: boolean,
  status = "Queued",
): BulkRetryOutcome {
  for (const id of row.ids) publishRetried(events, queue, id, status);
  return bulkOutcome(row.matched, row.ids, dryRun);
}

/**
 * The admin cancel, shared by every queue's `cancel` (each passes its own statements):
 * a runnable job is failed as {@linkcode CANCELLED} at once (`cancelRunnable`), and its
 * `cancelled` event published when `events` is given ({@linkcode publishCancelled}); a running
 * job of an in-process queue is asked to stop (`requestCancel`) and waited for up to `waitMs`; a
 * running job of a host-polled queue is refused; a finished one is left alone.
 *
 * @param statements the queue's own: `cancelRunnable` (the fenced write on the runnable status,
 *   returning the row or null), `read`, and what its statuses mean; `queue` and `id` name the
 *   job in its event.
 */
export async function cancelJob<
  R extends { status: string | null; error: string | null; attempt_count: number },
>(
  statements: {
    queue: string;
    id: string;
    /** Where the `cancelled` event goes; absent when `cancelRunnable` publishes it itself. */
    events?: JobEvents;
    cancelRunnable: () => Promise<R | null>;
    read: () => Promise<R | null>;
    running: string;
    /** Sends the cancel request to the running instance; absent for a host-polled queue. */
    requestCancel?: () => Promise<void>;
  },
  waitMs = CANCEL_WAIT_MS,
): Promise<CancelOutcome<R>> {
  // Twice: a job given back or retried later between the two statements is runnable again.
  for (let tries = 0; tries < 2; tries++) {
    const cancelled = await statements.cancelRunnable();
    if (cancelled) {
      if (statements.events) {
        publishCancelled(
          statements.events,
          statements.queue,
          statements.id,
          cancelled.attempt_count,
        );
      }
      return { outcome: "cancelled", job: cancelled };
    }
    const job = await statements.read();
    if (!job) return { outcome: "absent" };
    if (job.status === "Completed" || job.status === "Failed") return { outcome: "finished", job };
    if (job.status !== statements.running) continue;
    if (!statements.requestCancel) return { outcome: "running_host", job };
    await statements.requestCancel();
    const deadline = performance.now() + waitMs;
    let now = job;
    while (now.status === statements.running && performance.now() < deadline) {
      await new Promise((r) => setTimeout(r, 25));
      now = (await statements.read()) ?? now;
    }
    if (now.status === statements.running) return { outcome: "requested", job: now };
    if (now.status === "Failed" && now.error === CANCELLED) {
      return { outcome: "cancelled", job: now };
    }
    if (now.status === "Completed" || now.status === "Failed") {
      return { outcome: "finished", job: now };
    }
  }
  const job = await statements.read();
  return job ? { outcome: "requested", job } : { outcome: "absent" };
}
