/**
 * The site-rebuild queue in the process: its settings (`SSG_*`), its context (`STORAGE_DIR`,
 * `SITE_DIR`, `SITE_URL`) and the `/ssg` and `/editions` routes.
 *
 * @module
 */
import { parseQueueSettings } from "../../lib/config.ts";
import { consumed, defineQueue } from "../../lib/queue_setup.ts";
import * as ssg from "./mod.ts";
import { editionRoutes, ssgRoutes } from "./routes.ts";
import { ssgView } from "./view.ts";

export const queue = defineQueue({
  name: ssg.name,
  view: ssgView,
  settings: (env) => parseQueueSettings(env, ssg.defaults),
  setup({ base, config, control }, common) {
    const ctx: ssg.SsgContext = {
      ...base,
      storageDir: config.storageDir,
      siteDir: config.siteDir,
      siteUrl: config.siteUrl,
    };
    return {
      consume: consumed(ssg, ctx, common.timeoutMs),
      routes: { "/ssg": ssgRoutes(ctx, control), "/editions": editionRoutes(ctx) },
    };
  },
});
