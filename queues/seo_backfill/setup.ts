/**
 * The SEO backfill queue in the process: host-polled (its poller claims over `/seo`), so it has
 * settings (`SEO_STALE_AFTER_MS`) and routes but no consumer here.
 *
 * @module
 */
import { parseQueueSettings } from "../../lib/config.ts";
import { defineQueue } from "../../lib/queue_setup.ts";
import * as seo from "./mod.ts";
import { seoRoutes } from "./routes.ts";
import { seoView } from "./view.ts";

export const queue = defineQueue({
  name: seo.name,
  view: seoView,
  settings: (env) => parseQueueSettings(env, seo.defaults),
  setup: ({ base }, common) => ({
    routes: { "/seo": seoRoutes({ ...base, staleAfterMs: common.staleAfterMs }) },
  }),
});
