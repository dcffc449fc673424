import assert from "node:assert/strict";
import {
  ConfigError,
  parseConfig,
  parseQueueSettings,
  type QueueDefaults,
} from "../../lib/config.ts";
import * as ingestion from "../../queues/ingestion/mod.ts";
import * as ssg from "../../queues/ssg/mod.ts";
import * as seo from "../../queues/seo_backfill/mod.ts";
import * as autoPublish from "../../queues/auto_publish/mod.ts";
import * as enrichment from "../../queues/enrichment/mod.ts";

Deno.test("parseConfig() gives the documented defaults", () => {
  const config = parseConfig({});
  assert.equal(config.databaseUrl, undefined);
  assert.equal(config.host, "127.0.0.1");
  assert.equal(config.port, 8787);
  assert.equal(config.pollIntervalMs, 5000);
  assert.equal(config.shutdownBudgetMs, 5000);
  assert.equal(config.storageDir, ".data/storage");
  assert.ok(Object.isFrozen(config));
});

Deno.test("parseConfig() names the variable, what it expected and what it received", () => {
  const cases: Array<[Record<string, string>, string]> = [
    [{ PORT: "abc" }, 'Cannot parse PORT: expected a port number from 0 to 65535, received "abc"'],
    [{ POLL_INTERVAL_MS: "-5" }, "Cannot parse POLL_INTERVAL_MS"],
    [{ SHUTDOWN_BUDGET_MS: "0" }, "Cannot parse SHUTDOWN_BUDGET_MS"],
    [{ POLL_INTERVAL_MS: "99999999999" }, "up to 2147483647"],
    [{ STANDBY_RETRY_MS: "1.5" }, "Cannot parse STANDBY_RETRY_MS"],
    [{ DATABASE_URL: "mysql://x" }, "Cannot parse DATABASE_URL"],
    [{ DATABASE_URL: "postgres://%zz@127.0.0.1/x" }, "Cannot parse DATABASE_URL"],
    [{ DATABASE_URL: "postgres://127.0.0.1:99999/x" }, "Cannot parse DATABASE_URL"],
    [{ DATABASE_SCHEMA: "Public" }, "Cannot parse DATABASE_SCHEMA"],
    [{ DATABASE_SCHEMA: "pg_jobs" }, "not starting with pg_"],
    [{ DATABASE_SCHEMA: "s".repeat(41) }, "at most 40 characters"],
    [{ INTERNAL_API_TOKEN: "short" }, "Cannot parse INTERNAL_API_TOKEN"],
    [{ EMBEDDED_PG_PORT: "0" }, "Cannot parse EMBEDDED_PG_PORT"],
    [{ LOG_LEVEL: "loud" }, "Cannot parse LOG_LEVEL"],
  ];
  for (const [env, message] of cases) {
    assert.throws(() => parseConfig(env), (err: unknown) => {
      assert.ok(err instanceof ConfigError);
      assert.ok(err.message.includes(message), `${err.message} should include ${message}`);
      return true;
    });
  }
});

Deno.test("parseConfig() accepts good values and treats an empty string as unset", () => {
  const config = parseConfig({
    DATABASE_URL: "postgresql://u:p%40ss@db.internal:6543/jobs",
    PORT: "0",
    POLL_INTERVAL_MS: "250",
    INTERNAL_API_TOKEN: "0123456789abcdef",
    SHUTDOWN_BUDGET_MS: "",
  });
  assert.equal(config.databaseUrl, "postgresql://u:p%40ss@db.internal:6543/jobs");
  assert.equal(config.port, 0);
  assert.equal(config.pollIntervalMs, 250);
  assert.equal(config.shutdownBudgetMs, 5000);
});

Deno.test("parseQueueSettings() reads <QUEUE>_STALE_AFTER_MS and <QUEUE>_TIMEOUT_MS over the queue's defaults", () => {
  const defaults = parseQueueSettings({}, ingestion.defaults);
  assert.deepEqual({ ...defaults }, {
    staleAfterMs: 600_000,
    timeoutMs: 900_000,
    retentionDays: null,
  });
  const set = parseQueueSettings(
    { INGESTION_STALE_AFTER_MS: "1000", INGESTION_TIMEOUT_MS: "2000" },
    ingestion.defaults,
  );
  assert.deepEqual({ ...set }, { staleAfterMs: 1000, timeoutMs: 2000, retentionDays: null });
  assert.throws(
    () => parseQueueSettings({ INGESTION_TIMEOUT_MS: "soon" }, ingestion.defaults),
    (err: unknown) =>
      err instanceof ConfigError && err.message.startsWith("Cannot parse INGESTION_TIMEOUT_MS"),
  );
});

Deno.test("parseConfig() reads SITE_DIR and SITE_URL, adding the trailing slash", () => {
  assert.deepEqual(
    [parseConfig({}).siteDir, parseConfig({}).siteUrl],
    [".data/site", "http://localhost:8080/"],
  );
  const config = parseConfig({ SITE_DIR: "/srv/site/", SITE_URL: "https://books.example/shelf" });
  assert.deepEqual([config.siteDir, config.siteUrl], ["/srv/site", "https://books.example/shelf/"]);
  for (const bad of ["books.example", "ftp://books.example/", "https://b.example/?q=1"]) {
    assert.throws(
      () => parseConfig({ SITE_URL: bad }),
      new ConfigError(
        "Cannot parse SITE_URL: expected an absolute http:// or https:// URL without query or " +
          `fragment, received ${JSON.stringify(bad)}`,
      ),
    );
  }
});

Deno.test("parseQueueSettings() refuses a setting the queue does not have, saying why", () => {
  const settings = parseQueueSettings({ SSG_TIMEOUT_MS: "1234" }, ssg.defaults);
  assert.deepEqual({ ...settings }, { staleAfterMs: null, timeoutMs: 1234, retentionDays: null });
  assert.equal(parseQueueSettings({ SSG_STALE_AFTER_MS: "" }, ssg.defaults).staleAfterMs, null);
  assert.equal(parseQueueSettings({}, seo.defaults).timeoutMs, null);
  const cases: Array<
    [Record<string, string>, QueueDefaults<number | null, number | null>, string]
  > = [
    [{ SSG_STALE_AFTER_MS: "60000" }, ssg.defaults, "the ssg queue has no stale rule"],
    [{ SEO_TIMEOUT_MS: "60000" }, seo.defaults, "bounds its own run"],
    [{ AUTO_PUBLISH_STALE_AFTER_MS: "1" }, autoPublish.defaults, "no stale rule"],
    [{ AUTO_PUBLISH_TIMEOUT_MS: "1" }, autoPublish.defaults, "PUBLISH_COMMAND"],
    [{ SSG_RETENTION_DAYS: "30" }, ssg.defaults, "deletes no finished jobs"],
  ];
  for (const [env, defaults, why] of cases) {
    const [name, value] = Object.entries(env)[0];
    assert.throws(() => parseQueueSettings(env, defaults), (err: unknown) => {
      assert.ok(err instanceof ConfigError);
      assert.ok(err.message.startsWith(`Cannot use ${name}: `), err.message);
      assert.ok(err.message.includes(why), err.message);
      assert.ok(err.message.endsWith(`unset it (received "${value}")`), err.message);
      return true;
    });
  }
});

Deno.test("every setting is checked whenever it is set, its feature on or off", () => {
  const cases: Array<[string, () => unknown, RegExp]> = [
    // Checked though ENRICHMENT_API_URL is unset.
    [
      "ENRICHMENT_API_TIMEOUT_MS",
      () => enrichment.readRemoteSettings({ ENRICHMENT_API_TIMEOUT_MS: "abc" }),
      /^Cannot parse ENRICHMENT_API_TIMEOUT_MS: expected a positive integer \(ms\) up to 2147483647, received "abc"$/,
    ],
    [
      "ENRICHMENT_API_KEY",
      () => enrichment.readRemoteSettings({ ENRICHMENT_API_KEY: "sk-secret value" }),
      /^Cannot parse ENRICHMENT_API_KEY: expected printable characters without spaces, received a value of 15 characters$/,
    ],
    [
      "INDEXNOW_KEY",
      () => autoPublish.parseSettings({ INDEXNOW_KEY: "no!" }),
      /^Cannot parse INDEXNOW_KEY: expected 8 to 128 letters/,
    ],
    [
      "HOST",
      () => parseConfig({ HOST: "not a host!" }),
      /^Cannot parse HOST: expected an IPv4 or IPv6 address \(no brackets\) or a host name, received "not a host!"$/,
    ],
    ["HOST", () => parseConfig({ HOST: "1.2.3" }), /^Cannot parse HOST/],
    ["HOST", () => parseConfig({ HOST: "[::1]" }), /^Cannot parse HOST/],
    [
      "AUTO_PUBLISH_TIMEOUT_MS",
      () => autoPublish.parseSettings({ AUTO_PUBLISH_TIMEOUT_MS: "1" }),
      /^Cannot use AUTO_PUBLISH_TIMEOUT_MS: the auto-publish queue's runs are the host poller's/,
    ],
    // A wrong token is not echoed: only its length.
    [
      "METRICS_TOKEN",
      () => parseConfig({ METRICS_TOKEN: "short-secret" }),
      /^Cannot parse METRICS_TOKEN: expected at least 16 characters of A-Z a-z 0-9 - \. _ ~ \+ \/ then any = padding \(RFC 6750 b64token\), received a value of 12 characters$/,
    ],
  ];
  for (const [name, parse, message] of cases) {
    assert.throws(parse, (err: unknown) => {
      assert.ok(err instanceof ConfigError, `${name}: ${err}`);
      assert.match(err.message, message);
      return true;
    });
  }
  // Good values pass, the feature on or off.
  assert.equal(enrichment.readRemoteSettings({ ENRICHMENT_API_TIMEOUT_MS: "5000" }), null);
  assert.equal(autoPublish.parseSettings({ INDEXNOW_KEY: "abcdef123456" }).indexNow, null);
  for (const host of ["127.0.0.1", "0.0.0.0", "::", "::1", "localhost", "worker.internal"]) {
    assert.equal(parseConfig({ HOST: host }).host, host);
  }
});

Deno.test("parseQueueSettings() reads <QUEUE>_RETENTION_DAYS for a queue with a retention rule only", () => {
  assert.equal(
    parseQueueSettings({ INGESTION_RETENTION_DAYS: "30" }, ingestion.defaults).retentionDays,
    30,
  );
  for (const bad of ["0", "-1", "1.5", "soon", "36501"]) {
    assert.throws(
      () => parseQueueSettings({ INGESTION_RETENTION_DAYS: bad }, ingestion.defaults),
      (err: unknown) =>
        err instanceof ConfigError &&
        err.message ===
          `Cannot parse INGESTION_RETENTION_DAYS: expected a positive integer (days) up to 36500, ` +
            `received ${JSON.stringify(bad)}`,
      bad,
    );
  }
  // SSG declares no retention rule: its variable must be unset (the test above).
  assert.equal(parseQueueSettings({}, ssg.defaults).retentionDays, null);
});
