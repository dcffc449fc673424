/**
 * How a queue joins the process: each queue folder's `setup.ts` exports its {@linkcode QueueSetup}
 * as `queue`, and main.ts lists those setups once. A setup reads and checks every setting its
 * queue owns, then builds its context and parts from them: the in-process consumer's queue (for a
 * consumed queue), its API route families and its admin view. main.ts does the rest for every
 * queue alike (lock, wake, NOTIFY channel, consumer, stop order, metrics, dashboard).
 *
 * @module
 */
import type { Hono } from "hono";
import { type Config, ConfigError } from "./config.ts";
import type { Lifecycle } from "./lifecycle.ts";
import type { QueueControl } from "./control.ts";
import type { QueueLock } from "./lock.ts";
import type { Wake } from "./wake.ts";
import type { QueueView } from "./admin/queue_view.ts";
import type { ClaimedJob, Queue, QueueContext } from "./queue.ts";

/** Environment variables by name; an empty string counts as unset. */
export type Env = Readonly<Record<string, string | undefined>>;

/** What main.ts hands every setup: the parts of the process all queues share. */
export interface QueueHost {
  /** The worker's own settings (lib/config.ts). */
  readonly config: Config;
  /** The shared context: pool, logger, boot id, event hub. */
  readonly base: QueueContext;
  /** For a setup that runs something of its own that must stop with the process (a drain). */
  readonly lifecycle: Lifecycle;
  /** Pauses and cancel requests, across instances (lib/control.ts). */
  readonly control: QueueControl;
  /**
   * A session advisory lock of its own for a hosted drain (lib/lock.ts, key
   * `textstack:consumer:<schema>.<name>`), so one instance runs it; not a queue's lock.
   */
  lock(name: string): QueueLock;
  /** LISTEN on `<schema>.<table>` through the shared listener, feeding `wake`. */
  listen(table: string, wake: Wake): Promise<void>;
}

/** A consumed queue and the context its verbs receive, paired by {@linkcode consumed}. */
export interface Consumed {
  readonly queue: Queue<ClaimedJob, QueueContext>;
  readonly ctx: QueueContext;
  /** Longest one run may take, ms. */
  readonly runTimeoutMs: number;
}

/** What a queue adds to the process. */
export interface QueueParts {
  /** The queue this process consumes; absent for a host-polled queue (its poller claims). */
  readonly consume?: Consumed;
  /** Its route families under `/internal`, by path prefix (e.g. `/ingestion`). */
  readonly routes: Readonly<Record<string, Hono>>;
  /** Route prefixes that bound their own request bodies (an upload), exempt from the API's cap. */
  readonly unlimitedBodies?: readonly string[];
  /** Drops of the queue's own bounded channels, by channel name (ADR-052: drops are a metric). */
  readonly channelDrops?: () => Record<string, number>;
}

/** One queue, as main.ts lists it. */
export interface QueueSetup<S = unknown> {
  /** The queue's name in logs, events, metrics and the dashboard. */
  readonly name: string;
  /** Its admin view, for `/admin` and `/metrics`. */
  readonly view: QueueView;
  /**
   * Read and check every setting the queue owns. main.ts calls it for every queue before anything
   * starts, so a bad value stops the worker with nothing touched.
   *
   * @throws {ConfigError} naming the variable (lib/config.ts).
   */
  settings(env: Env): S;
  /** Build the queue's parts from its settings, once the database is migrated. */
  setup(host: QueueHost, settings: S): QueueParts;
}

/** Declares a setup, keeping its settings' type between {@linkcode QueueSetup.settings} and use. */
export function defineQueue<S>(setup: QueueSetup<S>): QueueSetup<S> {
  return setup;
}

/**
 * Pairs a consumed queue with its context; the pair is checked here, where both types are known,
 * and the consumer drives it without them.
 */
export function consumed<J extends ClaimedJob, C extends QueueContext>(
  queue: Queue<J, C>,
  ctx: C,
  runTimeoutMs: number,
): Consumed {
  return { queue: queue as unknown as Queue<ClaimedJob, QueueContext>, ctx, runTimeoutMs };
}

/**
 * `QUEUES`: the in-process queues this instance consumes, comma-separated (spaces around names
 * ignored); unset or empty, all of them. Every instance serves the whole API whatever it
 * consumes; a queue listed on two instances has one holder (its lock) and one standby.
 *
 * @param setups every queue, as main.ts lists them; those whose view says `consumer: "worker"`
 *   are the in-process ones.
 * @returns the names of the queues to consume here, in `setups`' order.
 * @throws {ConfigError} naming `QUEUES` for an unknown name, a host-polled queue (its poller claims
 *   through the API, which every instance serves) or an empty entry.
 * @example
 * consumedQueues({ QUEUES: "ingestion, ssg" }, setups); // ["ingestion", "ssg"]
 */
export function consumedQueues(env: Env, setups: readonly QueueSetup[]): string[] {
  const inProcess = setups.filter((s) => s.view.consumer === "worker").map((s) => s.name);
  const raw = env.QUEUES;
  if (raw === undefined || raw.trim() === "") return inProcess;
  const expected = `expected a comma-separated list of ${inProcess.join(", ")}`;
  const names = raw.split(",").map((name) => name.trim());
  for (const name of names) {
    const setup = setups.find((s) => s.name === name);
    const why = name === ""
      ? "an empty entry"
      : !setup
      ? `"${name}" is not a queue`
      : setup.view.consumer !== "worker"
      ? `"${name}" is host-polled: its poller claims through the API, which every instance serves`
      : undefined;
    if (why) {
      throw new ConfigError(
        `Cannot parse QUEUES: ${expected}, received ${JSON.stringify(raw)}: ${why}`,
      );
    }
  }
  return inProcess.filter((name) => names.includes(name));
}
