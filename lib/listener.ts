/**
 * NOTIFY → wake: one `sql.listen` per queue channel, on one dedicated listener connection, and a
 * liveness probe that proves delivery, not just the socket.
 *
 * postgres.js re-listens by itself after a dropped connection and calls `onlisten` after the
 * first listen and every reconnect; a NOTIFY sent while disconnected is lost, so `onlisten` wakes
 * the queue to catch up. Never call `listen` again in a loop: that stacks duplicate listeners.
 *
 * {@linkcode Listener}, the process's listener, does not rely on postgres.js's own re-listen: that
 * re-listen is tried once and its failure swallowed, so a reconnect that lands on a server that
 * refuses LISTEN (a standby in recovery after a failover: "cannot execute LISTEN during recovery")
 * left the worker deaf until the next probe. It holds one dedicated connection, checks
 * `pg_is_in_recovery()` on each one before its LISTENs (no LISTEN on a server in recovery), and
 * on that connection's close re-listens at once, with a capped backoff, until the LISTENs are in
 * place again on a primary; then it wakes every queue (the catch-up claim) and probes.
 *
 * A socket can stop delivering without closing (a NAT or proxy that drops it, a pooler that
 * accepts LISTEN and never delivers). So {@linkcode Listener} sends a NOTIFY on its own probe
 * channel through the pool, at start and every `probeEveryMs`, and expects it back within
 * `probeTimeoutMs`. On a miss it warns, marks itself degraded (`/readyz` says 503; the queues run
 * on polling meanwhile), and replaces its client — the new connection's `onlisten` runs each
 * queue's catch-up claim — then probes again sooner until one succeeds.
 *
 * @module
 */
import { cappedBackoff, InRecoveryError, type Sql } from "./db.ts";

import type { Logger } from "./log.ts";
import type { Wake } from "./wake.ts";

/**
 * What a channel's notifications reach: a payload on each NOTIFY, and a call on every (re)listen
 * (a NOTIFY sent while disconnected is lost, so the subscriber catches up then).
 */
export interface ChannelHandler {
  notify(payload: string): void;
  relisten(): void;
}

/** A live subscription to one channel. */
export interface Listening {
  /** Stop listening on the channel. */
  unlisten(): Promise<void>;
}

/**
 * Wake `wake` on every notification of `channel` and on every (re)listen.
 *
 * @param sql a client for the listener (postgres.js gives `listen` its own connection; give this
 *   client a capped `backoff`, see `cappedBackoff` in lib/db.ts).
 * @param channel case-sensitive NOTIFY channel, e.g. `public.ingestion_jobs`.
 * @returns once the first LISTEN is in place.
 * @throws the connection error when the first LISTEN fails.
 * @example
 * const listening = await listenForWakes(listenerSql, "public.ingestion_jobs", wake, log);
 * await listening.unlisten();
 */
export async function listenForWakes(
  sql: Sql,
  channel: string,
  wake: Wake,
  log: Logger,
): Promise<Listening> {
  let listens = 0;
  const { unlisten } = await sql.listen(
    channel,
    () => wake.notify(),
    () => {
      listens++;
      log.info({ channel, reconnect: listens > 1 }, "listening");
      wake.notify();
    },
  );
  return { unlisten };
}

/** What {@linkcode ListenerOptions.connect} hands the client it opens. */
export interface ListenerHooks {
  /** Every NOTIFY the connection receives: channel and payload. */
  onnotify: (channel: string, payload: string) => void;
  /** The connection closed (the server went away, the socket broke). */
  onclose: () => void;
}

/** Options for {@linkcode Listener}. */
export interface ListenerOptions {
  /**
   * Opens a fresh listener client: max 1 connection, never idling out, named `<app>-listener`,
   * with `hooks` as its `onnotify` and `onclose` (lib/db.ts `connect`).
   */
  connect: (hooks: ListenerHooks) => Sql;
  /** The pool: probes are sent through it, as a queue's commit would be. */
  pool: Sql;
  log: Logger;
  /** The probe's NOTIFY channel, e.g. `public._probe` (under 64 bytes). */
  probeChannel: string;
  /** How often (ms) a live listener is probed (default 30000). */
  probeEveryMs?: number;
  /** How long (ms) a probe may take to come back before it counts as a miss (default 5000). */
  probeTimeoutMs?: number;
}

const quoteChannel = (channel: string) => `"${channel.replaceAll('"', '""')}"`;

/**
 * The process's listener connection: queue channels → wakes, with a NOTIFY round-trip probe.
 *
 * @example
 * const listener = new Listener({ connect: (hooks) => connect(url, { …, max: 1, ...hooks }), pool: sql, log, probeChannel: "public._probe" });
 * await listener.listen("public.ingestion_jobs", wake);
 * await listener.start(); // first probe; then every probeEveryMs
 * listener.live; // false while degraded
 * await listener.close();
 */
export class Listener {
  readonly #o: ListenerOptions;
  readonly #channels = new Map<string, ChannelHandler>();
  readonly #token = crypto.randomUUID();
  #sql: Sql;
  /** Which client is current: hooks of a replaced client are ignored. */
  #generation = 0;
  /** The current client's recovery check (once per client), then its LISTENs. */
  #checked: Promise<void> | undefined;
  #pending: { seq: number; resolve: () => void } | undefined;
  #seq = 0;
  #live = false;
  #probed = false;
  #probeFailures = 0;
  #reconnects = 0;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #closed = false;
  #probing: Promise<boolean> | undefined;
  #relistening: Promise<void> | undefined;

  constructor(options: ListenerOptions) {
    this.#o = options;
    this.#sql = this.#open();
  }

  /** Whether the last probe came back (false before the first, and while degraded). */
  get live(): boolean {
    return this.#live;
  }

  /** Whether a probe has failed, or the connection was lost, and no probe has succeeded since. */
  get degraded(): boolean {
    return this.#probed && !this.#live;
  }

  /** Probes that did not come back in time, since start (for metrics). */
  get probeFailures(): number {
    return this.#probeFailures;
  }

  /**
   * Times the listener connection was re-established since start, for metrics: replaced after a
   * missed probe, or re-listened after its connection closed.
   */
  get reconnects(): number {
    return this.#reconnects;
  }

  /**
   * Wake `wake` on each NOTIFY of `channel`, and on every re-listen; or hand each payload to a
   * {@linkcode ChannelHandler}.
   *
   * @throws the connection error, or {@linkcode InRecoveryError}, when the first LISTEN fails.
   */
  async listen(channel: string, wake: Wake | ChannelHandler): Promise<void> {
    const handler: ChannelHandler = "relisten" in wake
      ? wake
      : { notify: () => wake.notify(), relisten: () => wake.notify() };
    this.#channels.set(channel, handler);
    await this.#listenOn(this.#sql, [channel]);
    this.#o.log.info({ channel, reconnect: false }, "listening");
    handler.relisten();
  }

  /**
   * Subscribe the probe channel, run the first probe, and probe every `probeEveryMs` from then on.
   *
   * @returns whether the first probe came back (false: warned, degraded, retrying).
   */
  async start(): Promise<boolean> {
    await this.#listenOn(this.#sql, [this.#o.probeChannel]);
    const ok = await this.probe();
    if (!ok) {
      this.#o.log.warn(
        { channel: this.#o.probeChannel },
        "notifications are not delivered at start: the worker needs a direct connection (LISTEN does not work through a transaction-mode pooler); running on polling",
      );
    }
    this.#schedule();
    return ok;
  }

  /**
   * Send one probe NOTIFY through the pool and wait for it on the listener. A miss reconnects
   * the listener. Concurrent calls share one probe.
   *
   * @returns whether it came back within `probeTimeoutMs`.
   */
  probe(): Promise<boolean> {
    this.#probing ??= this.#probe().finally(() => (this.#probing = undefined));
    return this.#probing;
  }

  /** Stop probing and close the listener connection. */
  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#timer);
    this.#generation++;
    await this.#sql.end({ timeout: 1 }).catch(() => {});
  }

  #open(): Sql {
    const generation = ++this.#generation;
    this.#checked = undefined;
    return this.#o.connect({
      onnotify: (channel, payload) => {
        if (generation !== this.#generation) return;
        if (channel === this.#o.probeChannel) {
          // Other instances on the same database probe the same channel: only ours count.
          const pending = this.#pending;
          if (pending && payload === `${this.#token}:${pending.seq}`) pending.resolve();
        } else {
          this.#channels.get(channel)?.notify(payload);
        }
      },
      onclose: () => {
        if (generation !== this.#generation || this.#closed) return;
        this.#o.log.warn("listener connection closed; re-listening");
        void this.#relisten();
      },
    });
  }

  // LISTEN on `channels`, after proving once per client that its server is not in recovery.
  async #listenOn(sql: Sql, channels: readonly string[]): Promise<void> {
    this.#checked ??= (async () => {
      const [{ recovering }] = await sql<{ recovering: boolean }[]>`
        select pg_is_in_recovery() as recovering`;
      if (recovering) {
        throw new InRecoveryError(
          "The listener's server is in recovery (a standby): no LISTEN there; waiting for a primary",
        );
      }
    })();
    const checked = this.#checked;
    try {
      await checked;
    } catch (err) {
      if (this.#checked === checked) this.#checked = undefined;
      throw err;
    }
    for (const channel of channels) await sql.unsafe(`listen ${quoteChannel(channel)}`);
  }

  async #probe(): Promise<boolean> {
    const seq = ++this.#seq;
    const timeoutMs = this.#o.probeTimeoutMs ?? 5000;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const back = new Promise<boolean>((resolve) => {
      this.#pending = { seq, resolve: () => resolve(true) };
      timer = setTimeout(() => resolve(false), timeoutMs);
    });
    try {
      await this.#o.pool`select pg_notify(${this.#o.probeChannel}, ${`${this.#token}:${seq}`})`;
    } catch (err) {
      // The database refused the NOTIFY itself: that says nothing about the listener.
      clearTimeout(timer);
      this.#o.log.debug({ err: String(err) }, "listener probe not sent");
      return this.#live;
    }
    const ok = await back;
    clearTimeout(timer);
    this.#pending = undefined;
    this.#probed = true;
    if (ok) {
      if (!this.#live && this.#probeFailures > 0) this.#o.log.info("listener delivers again");
      this.#live = true;
      return true;
    }
    this.#live = false;
    this.#probeFailures++;
    this.#o.log.warn(
      { timeoutMs, failures: this.#probeFailures },
      "listener probe missed: notifications are not delivered; reconnecting the listener",
    );
    if (!this.#closed) await this.#reconnect();
    return false;
  }

  #schedule(): void {
    if (this.#closed) return;
    clearTimeout(this.#timer);
    const every = this.#o.probeEveryMs ?? 30_000;
    // While degraded, probe sooner so readiness comes back soon after delivery does.
    const delay = this.#live ? every : Math.min(every, 5000);
    this.#timer = setTimeout(() => this.probe().finally(() => this.#schedule()), delay);
  }

  // A fresh client: the old socket may be half-open and never report its death. Each queue is
  // woken once its LISTEN is back (the catch-up claim for notifications lost meanwhile).
  async #reconnect(): Promise<void> {
    const old = this.#sql;
    this.#sql = this.#open();
    old.end({ timeout: 0 }).catch(() => {});
    try {
      await this.#listenAll(this.#sql);
    } catch (err) {
      this.#o.log.warn(
        { err: String(err) },
        "listener reconnect failed; re-listening",
      );
      void this.#relisten();
    }
  }

  async #listenAll(sql: Sql): Promise<void> {
    await this.#listenOn(sql, [this.#o.probeChannel, ...this.#channels.keys()]);
    this.#reconnects++;
    for (const [channel, handler] of this.#channels) {
      this.#o.log.info({ channel, reconnect: true }, "listening");
      handler.relisten();
    }
  }

  // The connection closed: notifications are lost until the LISTENs are back. Re-listen at once
  // on a fresh client, retrying with a capped backoff (0.1 s doubling to 2 s) while the server is
  // away or in recovery; then probe, so readiness follows within a round trip. One at a time.
  #relisten(): Promise<void> {
    this.#relistening ??= (async () => {
      this.#live = false;
      this.#probed = true;
      for (let attempt = 0; !this.#closed; attempt++) {
        const old = this.#sql;
        this.#sql = this.#open();
        old.end({ timeout: 0 }).catch(() => {});
        try {
          await this.#listenAll(this.#sql);
          break;
        } catch (err) {
          const delayMs = cappedBackoff(attempt) * 1000;
          this.#o.log.warn({ err: String(err), attempt, delayMs }, "re-listen failed; retrying");
          await new Promise((r) => setTimeout(r, delayMs));
        }
      }
    })().finally(() => (this.#relistening = undefined));
    const relistening = this.#relistening;
    relistening.then(() => !this.#closed && this.probe()).catch(() => {});
    return relistening;
  }
}
