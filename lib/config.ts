/**
 * Configuration: `Deno.env` parsed once into a typed, frozen {@linkcode Config}. A bad value stops
 * startup with a message naming the variable, what was expected and what was received.
 *
 * @module
 */
import { z } from "zod";
import { B64TOKEN } from "./http/bearer.ts";
import { DatabaseUrlError, parseDatabaseUrl } from "./database_url.ts";

/** The worker's settings, parsed once at startup. All durations are in milliseconds. */
export interface Config {
  /** Postgres URL; `undefined` means "start the embedded PostgreSQL under `dataDir`". */
  readonly databaseUrl: string | undefined;
  /** Schema that holds the queue tables (default `public`). */
  readonly databaseSchema: string;
  /** HTTP bind address (default `127.0.0.1`). */
  readonly host: string;
  /** HTTP port (default 8787; 0 picks a free port, logged at startup). */
  readonly port: number;
  /** Bearer token for `/internal/*`; `undefined` means "generate one under `dataDir`". */
  readonly internalApiToken: string | undefined;
  /** Bearer token for `/metrics` and the `/admin` login; `undefined` means the internal token. */
  readonly metricsToken: string | undefined;
  /** Time between the background counts behind `/metrics` and `/admin`, ms (default 10 000). */
  readonly statsIntervalMs: number;
  /** Directory that holds source files and chapter assets (default `<dataDir>/storage`). */
  readonly storageDir: string;
  /** Directory for local state: the embedded database and a generated token (default `.data`). */
  readonly dataDir: string;
  /** Poll interval in ms: the fallback wake when no NOTIFY arrives (default 5000). */
  readonly pollIntervalMs: number;
  /** Shutdown budget in ms from the first signal to exit (default 5000). */
  readonly shutdownBudgetMs: number;
  /** How often a standing-by consumer retries its queue lock, in ms (default 3000). */
  readonly standbyRetryMs: number;
  /** Port of the embedded PostgreSQL when `DATABASE_URL` is unset (default 54329). */
  readonly embeddedPgPort: number;
  /** pino log level (default `info`). */
  readonly logLevel: string;
  /** The live static site: a symlink to the current build (default `<dataDir>/site`). */
  readonly siteDir: string;
  /** Absolute base URL of the static site, ending in `/` (default `http://localhost:8080/`). */
  readonly siteUrl: string;
  /** How often the listener proves delivery with a NOTIFY round trip, in ms (default 30000). */
  readonly listenerProbeMs: number;
  /** Longest wait from a connection's opening to its request headers, in ms (default 30000). */
  readonly httpHeadersTimeoutMs: number;
  /** Longest idle wait between a response and the next request's headers, in ms (default 30000). */
  readonly httpIdleTimeoutMs: number;
  /** Open HTTP connections at most; a further one is refused (default 1024). */
  readonly httpMaxConnections: number;
  /** The dashboard's public origin (`https://ops.example.com`), when reached by another name. */
  readonly adminOrigin: string | undefined;
}

/** Thrown when an environment variable has a value the worker cannot use. */
export class ConfigError extends Error {
  override name = "ConfigError";
}

type Env = Readonly<Record<string, string | undefined>>;

function read<T>(
  env: Env,
  name: string,
  expected: string,
  schema: z.ZodType<T>,
  fallback: T,
  secret = false,
): T {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    // A secret is never echoed, not even a wrong one: only its length.
    const received = secret ? `a value of ${raw.length} characters` : JSON.stringify(raw);
    throw new ConfigError(`Cannot parse ${name}: expected ${expected}, received ${received}`);
  }
  return parsed.data;
}

// Timers take at most 2^31 - 1 ms (about 24.8 days); a larger delay would fire at once.
const MAX_MS = 2_147_483_647;
const ms = z.string().regex(/^\d+$/).transform(Number).pipe(z.number().int().min(1).max(MAX_MS));
const port = z.string().regex(/^\d+$/).transform(Number).pipe(z.number().int().min(0).max(65535));
const tcpPort = port.pipe(z.number().min(1));
// More connections than any open-file limit allows is a typo.
const MAX_CONNECTIONS = 1_048_576;
const connections = z.string().regex(/^\d+$/).transform(Number).pipe(
  z.number().int().min(1).max(MAX_CONNECTIONS),
);
// pg_ names are reserved by PostgreSQL. At most 40 characters: NOTIFY channels are named
// "<schema>.<table>" and PostgreSQL refuses a channel name of 64 bytes or more.
const identifier = z.string().regex(/^(?!pg_)[a-z_][a-z0-9_]{0,39}$/);
// What the bearer check parses (lib/http/bearer.ts), so an accepted token is a usable one.
const token = z.string().min(16).regex(B64TOKEN);
// An absolute http(s) base for the sitemap's URLs; the trailing "/" is added when missing.
const siteUrl = z.string().refine((raw) => {
  try {
    const parsed = new URL(raw);
    return /^https?:$/.test(parsed.protocol) && !parsed.search && !parsed.hash;
  } catch {
    return false;
  }
}).transform((raw) => raw.endsWith("/") ? raw : `${raw}/`);
// A browser's Origin: scheme, host, port; normalised as the browser sends it (no trailing "/").
const origin = z.string().refine((raw) => {
  try {
    const parsed = new URL(raw);
    return /^https?:$/.test(parsed.protocol) && parsed.origin === raw.replace(/\/$/, "");
  } catch {
    return false;
  }
}).transform((raw) => new URL(raw).origin);
const level = z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]);
// What Deno.serve can bind: an IPv4 or IPv6 literal (without brackets) or a DNS host name; a
// name of digits and dots only must be a whole IPv4 address ("1.2.3" would be read as 1.2.0.3).
const host = z.union([
  z.ipv4(),
  z.ipv6(),
  z.hostname().refine((raw) => !/^[\d.]+$/.test(raw)),
]);

// DATABASE_URL is read as libpq reads a URI (lib/database_url.ts): a host list, a local socket.
// It holds the password, so an error says what is wrong with it and never quotes it.
function readDatabaseUrl(env: Env): string | undefined {
  const raw = env.DATABASE_URL;
  if (raw === undefined || raw === "") return undefined;
  try {
    parseDatabaseUrl(raw);
  } catch (err) {
    if (!(err instanceof DatabaseUrlError)) throw err;
    throw new ConfigError(
      `Cannot parse DATABASE_URL: expected a postgres:// URL with a host (or a host list, or a ` +
        `socket directory), valid ports and %-escapes; ${err.message} (the value is not shown: ` +
        `it may hold a password)`,
    );
  }
  return raw;
}

function readMs(env: Env, name: string, fallback: number): number {
  return read(env, name, `a positive integer (ms) up to ${MAX_MS}`, ms, fallback);
}

/**
 * Parse the worker's settings from an environment map.
 *
 * @param env variables by name, e.g. `Deno.env.toObject()`; an empty string counts as unset.
 * @returns a frozen {@linkcode Config}.
 * @throws {ConfigError} when a variable is set to a value of the wrong shape; the message names it,
 *   e.g. `Cannot parse POLL_INTERVAL_MS: expected a positive integer (ms) up to 2147483647, received "0"`.
 * @example
 * const config = parseConfig({ POLL_INTERVAL_MS: "1000" });
 * config.pollIntervalMs; // 1000
 */
export function parseConfig(env: Env): Config {
  const dataDir = env.DATA_DIR || ".data";
  return Object.freeze({
    databaseUrl: readDatabaseUrl(env),
    databaseSchema: read(
      env,
      "DATABASE_SCHEMA",
      "a lower-case SQL identifier of at most 40 characters, not starting with pg_",
      identifier,
      "public",
    ),
    host: read(
      env,
      "HOST",
      "an IPv4 or IPv6 address (no brackets) or a host name",
      host,
      "127.0.0.1",
    ),
    port: read(env, "PORT", "a port number from 0 to 65535", port, 8787),
    internalApiToken: read(
      env,
      "INTERNAL_API_TOKEN",
      "at least 16 characters of A-Z a-z 0-9 - . _ ~ + / then any = padding (RFC 6750 b64token)",
      token,
      undefined,
      true,
    ),
    metricsToken: read(
      env,
      "METRICS_TOKEN",
      "at least 16 characters of A-Z a-z 0-9 - . _ ~ + / then any = padding (RFC 6750 b64token)",
      token,
      undefined,
      true,
    ),
    statsIntervalMs: readMs(env, "STATS_INTERVAL_MS", 10_000),
    storageDir: env.STORAGE_DIR || `${dataDir}/storage`,
    dataDir,
    pollIntervalMs: readMs(env, "POLL_INTERVAL_MS", 5000),
    shutdownBudgetMs: readMs(env, "SHUTDOWN_BUDGET_MS", 5000),
    standbyRetryMs: readMs(env, "STANDBY_RETRY_MS", 3000),
    listenerProbeMs: readMs(env, "LISTENER_PROBE_MS", 30_000),
    httpHeadersTimeoutMs: readMs(env, "HTTP_HEADERS_TIMEOUT_MS", 30_000),
    httpIdleTimeoutMs: readMs(env, "HTTP_IDLE_TIMEOUT_MS", 30_000),
    httpMaxConnections: read(
      env,
      "HTTP_MAX_CONNECTIONS",
      `a positive integer up to ${MAX_CONNECTIONS}`,
      connections,
      1024,
    ),
    embeddedPgPort: read(env, "EMBEDDED_PG_PORT", "a port number from 1 to 65535", tcpPort, 54329),
    logLevel: read(
      env,
      "LOG_LEVEL",
      "one of fatal, error, warn, info, debug, trace, silent",
      level,
      "info",
    ),
    adminOrigin: read(
      env,
      "ADMIN_ORIGIN",
      "an origin: http:// or https://, a host and an optional port, no path",
      origin,
      undefined,
    ),
    siteDir: (env.SITE_DIR || `${dataDir}/site`).replace(/(.)\/+$/, "$1"),
    siteUrl: read(
      env,
      "SITE_URL",
      "an absolute http:// or https:// URL without query or fragment",
      siteUrl,
      "http://localhost:8080/",
    ),
  });
}

/**
 * A queue's own settings and their defaults, declared by the queue module (docs/development.md: the
 * queue owns them; `lib/` only reads them).
 *
 * @typeParam Stale `number` for a queue with a stale rule (the default); `null` for one without
 *   (SSG: every `Running` row is dead before each claim, at any age), whose
 *   `<PREFIX>_STALE_AFTER_MS` must then be unset.
 * @typeParam Timeout `number` for a queue whose runs this process times (the default); `null` for
 *   one whose runs are a host command's (SEO, auto-publish), whose `<PREFIX>_TIMEOUT_MS` must then
 *   be unset.
 */
export interface QueueDefaults<
  Stale extends number | null = number,
  Timeout extends number | null = number,
> {
  /** The env prefix, e.g. `INGESTION` for `INGESTION_STALE_AFTER_MS` and `INGESTION_TIMEOUT_MS`. */
  readonly envPrefix: string;
  /** An in-flight row claimed longer ago than this (ms) is stale, by the queue's own rule. */
  readonly staleAfterMs: Stale;
  /** Longest one run may take (ms); then its signal aborts with a `TimeoutError`. */
  readonly timeoutMs: Timeout;
  /**
   * Why a setting the queue lacks (a `null` above) does not exist, for the startup error, e.g.
   * `{ staleAfterMs: "the ssg queue has no stale rule: …" }`.
   */
  readonly without?: { readonly staleAfterMs?: string; readonly timeoutMs?: string };
  /**
   * Declared only by a queue that can delete its finished jobs (a `prune` verb): days a
   * finished job is kept, null to keep them all. `<PREFIX>_RETENTION_DAYS` is then read; for any
   * other queue it must be unset.
   */
  readonly retentionDays?: number | null;
}

/** A queue's settings as read from the environment. All durations are in milliseconds. */
export interface QueueSettings<
  Stale extends number | null = number,
  Timeout extends number | null = number,
> {
  /** `<PREFIX>_STALE_AFTER_MS`, else the queue's default; null for a queue without a stale rule. */
  readonly staleAfterMs: Stale;
  /** `<PREFIX>_TIMEOUT_MS`, else the queue's default; null for a queue it does not time. */
  readonly timeoutMs: Timeout;
  /**
   * `<PREFIX>_RETENTION_DAYS` (whole days), else the queue's default; null keeps finished jobs
   * forever, and is all a queue without a retention rule gets.
   */
  readonly retentionDays: number | null;
}

/** Longest retention, in days (100 years): a bigger number is a typo, not a policy. */
const MAX_RETENTION_DAYS = 36_500;
const days = z.string().regex(/^\d+$/).transform(Number).pipe(
  z.number().int().min(1).max(MAX_RETENTION_DAYS),
);

/**
 * Read one queue's settings: `<PREFIX>_STALE_AFTER_MS`, `<PREFIX>_TIMEOUT_MS` and, for a queue
 * with a retention rule, `<PREFIX>_RETENTION_DAYS`. A setting the queue does not have must be
 * unset: a value there would be ignored, so it stops startup instead.
 *
 * @param env variables by name; an empty string counts as unset.
 * @param defaults the queue module's declaration.
 * @returns the frozen settings.
 * @throws {ConfigError} naming the variable when one is set to a value of the wrong shape, or is
 *   set at all for a queue without that setting (`Cannot use SSG_STALE_AFTER_MS: …`).
 * @example
 * parseQueueSettings({ INGESTION_TIMEOUT_MS: "60000" }, ingestion.defaults).timeoutMs; // 60000
 */
export function parseQueueSettings<Stale extends number | null, Timeout extends number | null>(
  env: Env,
  defaults: QueueDefaults<Stale, Timeout>,
): QueueSettings<Stale, Timeout> {
  const setting = <T extends number | null>(
    suffix: string,
    fallback: T,
    why: string | undefined,
  ): T => {
    const name = `${defaults.envPrefix}_${suffix}`;
    if (fallback !== null) return readMs(env, name, fallback) as T;
    const raw = env[name];
    if (raw !== undefined && raw !== "") {
      throw new ConfigError(
        `Cannot use ${name}: ${
          why ?? "the queue has no such setting"
        }, so a value would be ignored; unset it (received ${JSON.stringify(raw)})`,
      );
    }
    return fallback;
  };
  return Object.freeze({
    staleAfterMs: setting("STALE_AFTER_MS", defaults.staleAfterMs, defaults.without?.staleAfterMs),
    timeoutMs: setting("TIMEOUT_MS", defaults.timeoutMs, defaults.without?.timeoutMs),
    retentionDays: defaults.retentionDays === undefined
      ? setting("RETENTION_DAYS", null, "the queue deletes no finished jobs")
      : read(
        env,
        `${defaults.envPrefix}_RETENTION_DAYS`,
        `a positive integer (days) up to ${MAX_RETENTION_DAYS}`,
        days,
        defaults.retentionDays,
      ),
  });
}
