/**
 * The auto-publish queue's settings, read once at startup (main.ts, through setup.ts): its
 * `AUTO_PUBLISH_*` time settings, which it lacks and refuses, `AUTO_PUBLISH_ON_INGEST`, and the
 * IndexNow settings (`INDEXNOW_URL`, `INDEXNOW_KEY`, `SITE_URL`). Re-exported by mod.ts.
 *
 * @module
 */
import { ConfigError, parseQueueSettings, type QueueDefaults } from "../../lib/config.ts";
import type { IndexNowSettings } from "./_indexnow.ts";

/**
 * No time-based settings: no stale rule (the poller's startup `recover` is the crash recovery)
 * and no run timeout (the host command's own). `AUTO_PUBLISH_STALE_AFTER_MS` and
 * `AUTO_PUBLISH_TIMEOUT_MS` would be ignored, so a set value stops startup.
 */
export const defaults: QueueDefaults<null, null> = {
  envPrefix: "AUTO_PUBLISH",
  staleAfterMs: null,
  timeoutMs: null,
  without: {
    staleAfterMs: "the auto-publish queue has no stale rule (the poller's start fails every " +
      "Running job: POST /internal/auto-publish/recover)",
    timeoutMs: "the auto-publish queue's runs are the host poller's PUBLISH_COMMAND, which " +
      "bounds its own run",
  },
};

/** This queue's settings, read once at startup by main.ts. */
export interface AutoPublishSettings {
  /** `AUTO_PUBLISH_ON_INGEST` (default true): create a job when an ingestion completes. */
  readonly onIngest: boolean;
  /** From `INDEXNOW_URL`, `INDEXNOW_KEY`, `SITE_URL`; null when `INDEXNOW_URL` is unset (no ping). */
  readonly indexNow: IndexNowSettings | null;
}

/**
 * Read `AUTO_PUBLISH_ON_INGEST` (`true`/`false`/`1`/`0`, default on), `INDEXNOW_URL`,
 * `INDEXNOW_KEY` and `SITE_URL` (both required once `INDEXNOW_URL` is set). `INDEXNOW_KEY` is
 * checked whenever it is set, and the time settings this queue lacks ({@linkcode defaults}) must
 * be unset: every setting is checked at startup.
 *
 * @param env variables by name; an empty string counts as unset.
 * @throws {ConfigError} naming the variable, e.g.
 *   `Cannot parse SITE_URL: expected an http(s) URL (required with INDEXNOW_URL), received ""`.
 */
export function parseSettings(
  env: Readonly<Record<string, string | undefined>>,
): AutoPublishSettings {
  const flag = env.AUTO_PUBLISH_ON_INGEST || "true";
  if (!/^(true|false|1|0)$/.test(flag)) {
    throw new ConfigError(
      `Cannot parse AUTO_PUBLISH_ON_INGEST: expected true, false, 1 or 0, received ${
        JSON.stringify(flag)
      }`,
    );
  }
  const httpUrl = (name: string, expected: string): string => {
    const raw = env[name] ?? "";
    let ok = false;
    try {
      ok = /^https?:$/.test(new URL(raw).protocol);
    } catch { /* not a URL */ }
    if (!ok) {
      throw new ConfigError(
        `Cannot parse ${name}: expected ${expected}, received ${JSON.stringify(raw)}`,
      );
    }
    return raw.replace(/\/+$/, "");
  };
  parseQueueSettings(env, defaults);
  const key = env.INDEXNOW_KEY ?? "";
  const keyError = () =>
    new ConfigError(
      "Cannot parse INDEXNOW_KEY: expected 8 to 128 letters, digits or dashes (required with " +
        `INDEXNOW_URL), received ${key ? `${key.length} characters` : '""'}`,
    );
  const goodKey = /^[A-Za-z0-9-]{8,128}$/.test(key);
  // Checked whenever it is set, INDEXNOW_URL or not.
  if (key && !goodKey) throw keyError();
  let indexNow: IndexNowSettings | null = null;
  if (env.INDEXNOW_URL) {
    const url = httpUrl("INDEXNOW_URL", "an http(s) URL");
    const siteUrl = httpUrl("SITE_URL", "an http(s) URL (required with INDEXNOW_URL)");
    if (!goodKey) throw keyError();
    indexNow = { url, key, siteUrl };
  }
  return Object.freeze({ onIngest: flag === "true" || flag === "1", indexNow });
}
