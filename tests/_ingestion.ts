/**
 * Shared setup for the ingestion tests: a context on a test schema, a storage directory, and
 * helpers to write source files and read rows.
 *
 * @module
 */
import { createLogger, type Logger } from "../lib/log.ts";
import { EventHub, type SequencedEvent } from "../lib/events.ts";
import { connect, type Sql } from "../lib/db.ts";
import { Consumer } from "../lib/consumer.ts";
import { type Queue } from "../lib/queue.ts";
import { QueueLock } from "../lib/lock.ts";
import { Wake } from "../lib/wake.ts";
import { listenForWakes } from "../lib/listener.ts";
import * as ingestion from "../queues/ingestion/mod.ts";
import type { IngestionContext, IngestionJob, IngestionJobRow } from "../queues/ingestion/mod.ts";
import { type TestDb, waitFor } from "./_db.ts";

/** An ingestion context bound to `db`, with a fresh storage directory and an event hub. */
export async function ingestionContext(
  db: TestDb,
  options: { bootId?: string; staleAfterMs?: number; storageDir?: string } = {},
): Promise<IngestionContext & { events: EventHub }> {
  return {
    sql: db.sql,
    log: createLogger(Deno.env.get("TEST_LOG_LEVEL") ?? "silent"),
    bootId: options.bootId ?? crypto.randomUUID(),
    events: new EventHub(),
    storageDir: options.storageDir ?? await Deno.makeTempDir({ prefix: "textstack-storage-" }),
    staleAfterMs: options.staleAfterMs ?? 600_000,
  };
}

/** Write a source file under the storage root; returns its relative path. */
export async function writeSource(storageDir: string, name: string, text: string): Promise<string> {
  await Deno.writeTextFile(`${storageDir}/${name}`, text);
  return name;
}

/** A three-chapter plain-text book. */
export const SMALL_BOOK = [
  "The Test Book",
  "by Ada Tester",
  "",
  "CHAPTER I",
  "",
  "It was a bright cold day.",
  "",
  "CHAPTER II",
  "",
  "The clocks were striking thirteen.",
  "",
  "CHAPTER III",
  "",
  "The end.",
  "",
].join("\n");

/** Insert a job row directly; returns its id. */
export async function insertJob(db: TestDb, sourcePath: string): Promise<string> {
  const [row] = await db.sql<{ id: string }[]>`
    insert into ingestion_jobs (source_path) values (${sourcePath}) returning id`;
  return row.id;
}

/** Read one job row. */
export async function jobRow(db: TestDb, id: string): Promise<IngestionJobRow> {
  const [row] = await db.sql<IngestionJobRow[]>`select * from ingestion_jobs where id = ${id}`;
  return row;
}

/** Collect every event published on `hub` from now on. */
export function recordEvents(
  hub: EventHub,
): { events: SequencedEvent[]; stop(): Promise<void> } {
  const events: SequencedEvent[] = [];
  const sub = hub.subscribe(10_000);
  const loop = (async () => {
    for await (const event of sub.channel) events.push(event);
  })();
  return {
    events,
    async stop() {
      sub.close();
      await loop;
    },
  };
}

/** A running in-process ingestion consumer with its own listener connection. */
export interface RunningConsumer {
  consumer: Consumer<IngestionJob, IngestionContext>;
  wake: Wake;
  lock: QueueLock;
  listenerSql: Sql;
  /** Stop the consumer (deadline in ms from now) and close the listener. */
  stop(budgetMs?: number): Promise<void>;
}

/**
 * Start the ingestion consumer the way main.ts does: lock, wake, listener, poll timer.
 *
 * @param queue defaults to the real ingestion module; a test may wrap one verb.
 */
export async function startConsumer(
  db: TestDb,
  ctx: IngestionContext,
  options: {
    pollIntervalMs?: number;
    standbyRetryMs?: number;
    runTimeoutMs?: number;
    abortGraceMs?: number;
    queue?: Queue<IngestionJob, IngestionContext>;
    applicationName?: string;
    /** The consumer's pause flag (lib/consumer.ts `paused`). */
    paused?: () => boolean;
  } = {},
): Promise<RunningConsumer> {
  const queue = options.queue ?? ingestion;
  const wake = new Wake(queue.name);
  const lock = new QueueLock({ url: db.url, schema: db.schema, queue: queue.name, log: ctx.log });
  const listenerSql = connect(db.url, {
    schema: db.schema,
    applicationName: options.applicationName ?? `${db.applicationName}-listener`,
    max: 1,
  });
  await listenForWakes(listenerSql, `${db.schema}.${queue.table}`, wake, ctx.log);
  const consumer = new Consumer({
    queue,
    ctx,
    lock,
    wake,
    pollIntervalMs: options.pollIntervalMs ?? 30_000,
    standbyRetryMs: options.standbyRetryMs ?? 100,
    runTimeoutMs: options.runTimeoutMs ?? 60_000,
    abortGraceMs: options.abortGraceMs,
    paused: options.paused,
  });
  consumer.start();
  return {
    consumer,
    wake,
    lock,
    listenerSql,
    async stop(budgetMs = 2000) {
      await consumer.stop(performance.now() + budgetMs);
      await listenerSql.end({ timeout: 1 });
    },
  };
}

/** A table lock held by another session, to make a save block at a known point. */
export interface HeldLock {
  /**
   * Wait until a backend of this test's pool (matched by its own `application_name`, never
   * another run's backends on a shared server) is blocked on the lock; returns its pid.
   */
  blocked(): Promise<number>;
  /** Release the lock and close the holding session. */
  release(): Promise<void>;
}

/** Take `lock table editions in access exclusive mode` in a separate session and keep it. */
export async function holdEditionsLock(db: TestDb): Promise<HeldLock> {
  const holder = connect(db.url, {
    schema: db.schema,
    applicationName: `${db.applicationName}-holder`,
    max: 1,
  });
  const locked = Promise.withResolvers<void>();
  const release = Promise.withResolvers<void>();
  const holding = holder.begin(async (tx) => {
    await tx`lock table editions in access exclusive mode`;
    locked.resolve();
    await release.promise;
  });
  await Promise.race([locked.promise, holding]);
  return {
    async blocked() {
      const [row] = await waitFor("a save to wait on the editions lock", async () => {
        const rows = await db.sql<{ pid: number }[]>`
          select pid from pg_stat_activity
          where wait_event_type = 'Lock' and query ilike '%editions%'
            and application_name = ${db.applicationName}`;
        return rows.length > 0 ? rows : null;
      }, 30_000); // the run extracts the book first, which a loaded machine makes slow
      return row.pid;
    },
    async release() {
      release.resolve();
      await holding.catch(() => {});
      await holder.end({ timeout: 1 });
    },
  };
}

/**
 * A logger that also pushes the object of every info/warn/error line whose message is `msg` into
 * `into`, its children (the consumer logs through `log.child({ queue })`) included.
 */
export function spyLog(log: Logger, msg: string, into: unknown[]): Logger {
  const spy = Object.create(log) as Logger;
  for (const level of ["info", "warn", "error"] as const) {
    const write = log[level].bind(log) as (obj: unknown, msg?: string) => void;
    Object.defineProperty(spy, level, {
      value: (obj: unknown, message?: string) => {
        if (message === msg) into.push(obj);
        write(obj, message);
      },
    });
  }
  Object.defineProperty(spy, "child", {
    value: (bindings: Record<string, unknown>) => spyLog(log.child(bindings), msg, into),
  });
  return spy;
}
