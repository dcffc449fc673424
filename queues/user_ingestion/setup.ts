/**
 * The user-ingestion queue in the process: its settings (`USER_INGESTION_*`, `MAX_UPLOAD_BYTES`),
 * its context and the `/user-books` routes, which bound their own upload bodies.
 *
 * @module
 */
import { parseQueueSettings } from "../../lib/config.ts";
import { parseMaxUploadBytes } from "../../lib/http/multipart.ts";
import { consumed, defineQueue } from "../../lib/queue_setup.ts";
import * as userIngestion from "./mod.ts";
import { UNLIMITED_BODY_PATHS, userBookRoutes } from "./routes.ts";
import { userIngestionView } from "./view.ts";

export const queue = defineQueue({
  name: userIngestion.name,
  view: userIngestionView,
  settings: (env) => ({
    common: parseQueueSettings(env, userIngestion.defaults),
    maxUploadBytes: parseMaxUploadBytes(env),
  }),
  setup({ base, config, control }, { common, maxUploadBytes }) {
    const ctx: userIngestion.UserIngestionContext = {
      ...base,
      storageDir: config.storageDir,
      staleAfterMs: common.staleAfterMs,
    };
    return {
      consume: consumed(userIngestion, ctx, common.timeoutMs),
      routes: { "/user-books": userBookRoutes(ctx, maxUploadBytes, control) },
      unlimitedBodies: UNLIMITED_BODY_PATHS,
    };
  },
});
