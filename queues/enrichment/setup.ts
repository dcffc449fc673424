/**
 * The enrichment queue in the process: its settings (`ENRICHMENT_*`, the remote engine's included),
 * its context and its routes.
 *
 * @module
 */
import { parseQueueSettings } from "../../lib/config.ts";
import { consumed, defineQueue } from "../../lib/queue_setup.ts";
import * as enrichment from "./mod.ts";
import { enrichmentRoutes } from "./routes.ts";
import { enrichmentView } from "./view.ts";

export const queue = defineQueue({
  name: enrichment.name,
  view: enrichmentView,
  settings: (env) => ({
    common: parseQueueSettings(env, enrichment.defaults),
    remote: enrichment.readRemoteSettings(env),
  }),
  setup({ base, control }, { common, remote }) {
    const ctx: enrichment.EnrichmentContext = {
      ...base,
      staleAfterMs: common.staleAfterMs,
      remote: enrichment.remoteEngine(remote),
    };
    return {
      consume: consumed(enrichment, ctx, common.timeoutMs),
      routes: { "/enrichment": enrichmentRoutes(ctx, control) },
    };
  },
});
