/**
 * The enrichment queue's remote engine settings: the `ENRICHMENT_API_*` variables read and checked
 * ({@linkcode readRemoteSettings}), and the engine they make ({@linkcode remoteEngine}), whose
 * SDK is loaded on first use. mod.ts exports them for setup.ts.
 *
 * @module
 */
import type OpenAI from "openai";
import { ConfigError } from "../../lib/config.ts";
import type { RemoteSettings } from "./_remote.ts";

/** The remote engine, when `ENRICHMENT_API_URL` is set. */
export interface RemoteEngine {
  /** The SDK client, built (and the SDK loaded) on first use. */
  client(): Promise<OpenAI>;
  readonly settings: RemoteSettings;
}

/**
 * Read the remote engine's settings: on when `ENRICHMENT_API_URL` is set. Every one is checked
 * whenever it is set, the engine on or off.
 *
 * @param env variables by name; an empty string counts as unset.
 * @returns the settings, or null when `ENRICHMENT_API_URL` is unset.
 * @throws {ConfigError} when `ENRICHMENT_API_URL` is not an http(s) URL, `ENRICHMENT_MODEL` is
 *   missing while the URL is set, `ENRICHMENT_API_KEY` holds spaces or control characters (it
 *   goes into a header), `ENRICHMENT_API_TIMEOUT_MS` is not a positive integer,
 *   `ENRICHMENT_API_MAX_RETRIES` is not an integer from 0 to 10 (default 2), or
 *   `ENRICHMENT_RETRY_AFTER_MAX_MS` not one from 0 to 3600000 (default 120000).
 */
export function readRemoteSettings(
  env: Readonly<Record<string, string | undefined>>,
): RemoteSettings | null {
  const rawTimeout = env.ENRICHMENT_API_TIMEOUT_MS || "60000";
  if (!/^\d+$/.test(rawTimeout) || Number(rawTimeout) < 1 || Number(rawTimeout) > 2_147_483_647) {
    throw new ConfigError(
      `Cannot parse ENRICHMENT_API_TIMEOUT_MS: expected a positive integer (ms) up to 2147483647, received ${
        JSON.stringify(rawTimeout)
      }`,
    );
  }
  const retries = integerSetting(env, "ENRICHMENT_API_MAX_RETRIES", 2, 0, 10);
  const waitMax = integerSetting(env, "ENRICHMENT_RETRY_AFTER_MAX_MS", 120_000, 0, 3_600_000);
  const apiKey = env.ENRICHMENT_API_KEY || undefined;
  if (apiKey !== undefined && !/^[\x21-\x7e]+$/.test(apiKey)) {
    // A secret is never echoed, not even a wrong one: only its length.
    throw new ConfigError(
      "Cannot parse ENRICHMENT_API_KEY: expected printable characters without spaces, received " +
        `a value of ${apiKey.length} characters`,
    );
  }
  const url = env.ENRICHMENT_API_URL;
  if (!url) return null;
  let parsed: URL | null = null;
  try {
    parsed = new URL(url);
  } catch { /* reported below */ }
  if (!parsed || !/^https?:$/.test(parsed.protocol)) {
    throw new ConfigError(
      `Cannot parse ENRICHMENT_API_URL: expected an http:// or https:// URL, received ${
        JSON.stringify(url)
      }`,
    );
  }
  const model = env.ENRICHMENT_MODEL;
  if (!model) {
    throw new ConfigError(
      'Cannot parse ENRICHMENT_MODEL: expected a model name when ENRICHMENT_API_URL is set, received ""',
    );
  }
  return {
    url,
    apiKey,
    model,
    timeoutMs: Number(rawTimeout),
    maxRetries: retries,
    retryAfterMaxMs: waitMax,
  };
}

// A whole number in [min, max], or its default when unset.
function integerSetting(
  env: Readonly<Record<string, string | undefined>>,
  name: string,
  fallback: number,
  min: number,
  max: number,
): number {
  const raw = env[name] || String(fallback);
  if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) {
    throw new ConfigError(
      `Cannot parse ${name}: expected an integer from ${min} to ${max}, received ${
        JSON.stringify(raw)
      }`,
    );
  }
  return Number(raw);
}

/** The remote engine for these settings, or null (local only). */
export function remoteEngine(settings: RemoteSettings | null): RemoteEngine | null {
  if (!settings) return null;
  let client: Promise<OpenAI> | undefined;
  return {
    client: () => client ??= import("./_remote.ts").then((m) => m.createClient(settings)),
    settings,
  };
}
