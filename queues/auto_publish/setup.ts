/**
 * The auto-publish queue in the process: host-polled (its poller claims over `/auto-publish`), so
 * it has settings and routes but no consumer here. When `INDEXNOW_URL` is set, a complete records
 * its IndexNow ping in the outbox in its own transaction, and the outbox drain started here
 * delivers it after the commit under its own advisory lock (lib/outbox.ts, docs/outbox.md):
 * plumbing, not a queue.
 *
 * @module
 */
import { defineQueue, type QueueHost } from "../../lib/queue_setup.ts";
import { OutboxDrain } from "../../lib/outbox.ts";
import { Wake } from "../../lib/wake.ts";
import * as autoPublish from "./mod.ts";
import { editionUrl, OUTBOX_KIND, ping } from "./_indexnow.ts";
import { autoPublishRoutes } from "./routes.ts";
import { autoPublishView } from "./view.ts";

/** The outbox drain, started and stopped with the process; none when IndexNow is off. */
function outboxDrain(host: QueueHost, settings: autoPublish.AutoPublishSettings): boolean {
  const { base: { sql, log }, config, lifecycle } = host;
  const indexNow = settings.indexNow;
  if (!indexNow) {
    log.info("INDEXNOW_URL unset: auto-publish will not ping IndexNow");
    return false;
  }
  const wake = new Wake("outbox");
  const drain = new OutboxDrain({
    sql,
    log,
    lock: host.lock("outbox"),
    wake,
    pollIntervalMs: config.pollIntervalMs,
    standbyRetryMs: config.standbyRetryMs,
    handlers: {
      [OUTBOX_KIND]: async (payload, signal) => {
        const editionId = String(payload.edition_id);
        await ping(indexNow, [editionUrl(indexNow.siteUrl, editionId)], signal);
        log.info({ edition: editionId, version: payload.asset_version }, "indexnow pinged");
      },
    },
  });
  // A failed LISTEN only costs latency: the drain also polls.
  host.listen("outbox", wake).catch((err) =>
    log.warn({ err: String(err?.message ?? err) }, "cannot listen for outbox records; polling")
  );
  drain.start();
  lifecycle.onStop("drains", "outbox", async (deadline) => {
    await drain.stop(Math.max(0, deadline - performance.now()));
  });
  return true;
}

export const queue = defineQueue({
  name: autoPublish.name,
  view: autoPublishView,
  settings: autoPublish.parseSettings,
  setup(host, settings) {
    const indexNow = outboxDrain(host, settings);
    return { routes: { "/auto-publish": autoPublishRoutes({ ...host.base, indexNow }) } };
  },
});
