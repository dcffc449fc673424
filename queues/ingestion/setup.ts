/**
 * The ingestion queue in the process: its settings (`INGESTION_*`), its context and its routes.
 * Auto-publish's on-ingest statement joins the completing save (`AUTO_PUBLISH_ON_INGEST`), so it
 * commits with the edition or not at all.
 *
 * @module
 */
import { parseQueueSettings } from "../../lib/config.ts";
import { consumed, defineQueue } from "../../lib/queue_setup.ts";
import * as autoPublish from "../auto_publish/mod.ts";
import * as ingestion from "./mod.ts";
import { ingestionRoutes } from "./routes.ts";
import { ingestionView } from "./view.ts";

export const queue = defineQueue({
  name: ingestion.name,
  view: ingestionView,
  settings: (env) => ({
    common: parseQueueSettings(env, ingestion.defaults),
    onIngest: autoPublish.parseSettings(env).onIngest,
  }),
  setup({ base, config, control }, { common, onIngest }) {
    const ctx: ingestion.IngestionContext = {
      ...base,
      storageDir: config.storageDir,
      staleAfterMs: common.staleAfterMs,
      retentionDays: common.retentionDays,
      onEditionSaved: onIngest
        ? {
          statement: autoPublish.createOnIngest,
          report: (editionId, created) => autoPublish.reportOnIngest(base.log, editionId, created),
        }
        : undefined,
    };
    return {
      consume: consumed(ingestion, ctx, common.timeoutMs),
      routes: { "/ingestion": ingestionRoutes(ctx, control) },
    };
  },
});
