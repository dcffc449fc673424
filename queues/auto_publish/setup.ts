/**
 * The auto-publish queue in the process: host-polled (its poller claims over `/auto-publish`), so
 * it has settings and routes but no consumer here. After a complete commits, the edition is pinged
 * to IndexNow when `INDEXNOW_URL` is set: post-commit, best effort, through a bounded channel and
 * its hosted drain (ADR-052). Drop-oldest: a ping is worth less than the request path's latency.
 *
 * @module
 */
import { BoundedChannel } from "../../lib/channel.ts";
import { Drain } from "../../lib/drain.ts";
import { defineQueue, type QueueHost } from "../../lib/queue_setup.ts";
import * as autoPublish from "./mod.ts";
import { editionUrl, ping } from "./_indexnow.ts";
import { autoPublishRoutes } from "./routes.ts";
import { autoPublishView } from "./view.ts";

/** The IndexNow drain, started and stopped with the process; none when IndexNow is off. */
function indexNowDrain(
  { base: { log }, lifecycle }: QueueHost,
  settings: autoPublish.AutoPublishSettings,
) {
  const indexNow = settings.indexNow;
  if (!indexNow) {
    log.info("INDEXNOW_URL unset: auto-publish will not ping IndexNow");
    return { announce: (_editionId: string) => {}, channelDrops: () => ({}) };
  }
  const pings = new BoundedChannel<string>({
    capacity: 256,
    mode: "drop-oldest",
    name: "indexnow",
  });
  const drain = new Drain({
    name: "indexnow",
    channel: pings,
    log,
    handle: async (editionId, signal) => {
      await ping(indexNow, [editionUrl(indexNow.siteUrl, editionId)], signal);
      log.info({ edition: editionId }, "indexnow pinged");
    },
  });
  drain.start();
  lifecycle.onStop("drains", "indexnow", async (deadline) => {
    await drain.stop(Math.max(0, deadline - performance.now()));
  });
  return {
    announce: (editionId: string) => void pings.tryWrite(editionId),
    channelDrops: () => ({ indexnow: pings.stats().dropped }),
  };
}

export const queue = defineQueue({
  name: autoPublish.name,
  view: autoPublishView,
  settings: autoPublish.parseSettings,
  setup(host, settings) {
    const { announce, channelDrops } = indexNowDrain(host, settings);
    return {
      routes: { "/auto-publish": autoPublishRoutes({ ...host.base, announce }) },
      channelDrops,
    };
  },
});
