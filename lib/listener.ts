/**
 * NOTIFY → wake: one `sql.listen` per queue channel. postgres.js re-listens by itself after a
 * dropped connection and calls `onlisten` after the first listen and every reconnect; a NOTIFY
 * sent while disconnected is lost, so `onlisten` wakes the queue to catch up. Never call `listen`
 * again in a loop: that stacks duplicate listeners.
 *
 * @module
 */
import type { Sql } from "./db.ts";
import type { Logger } from "./log.ts";
import type { Wake } from "./wake.ts";

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
