import assert from "node:assert/strict";
import { ConfigError, parseConfig, parseQueueSettings } from "../lib/config.ts";
import * as ingestion from "../queues/ingestion.ts";
import * as ssg from "../queues/ssg.ts";

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
  assert.deepEqual({ ...defaults }, { staleAfterMs: 600_000, timeoutMs: 900_000 });
  const set = parseQueueSettings(
    { INGESTION_STALE_AFTER_MS: "1000", INGESTION_TIMEOUT_MS: "2000" },
    ingestion.defaults,
  );
  assert.deepEqual({ ...set }, { staleAfterMs: 1000, timeoutMs: 2000 });
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

Deno.test("parseQueueSettings() reads no <QUEUE>_STALE_AFTER_MS for a queue without a stale rule", () => {
  const settings = parseQueueSettings(
    { SSG_STALE_AFTER_MS: "oops", SSG_TIMEOUT_MS: "1234" },
    ssg.defaults,
  );
  assert.deepEqual({ ...settings }, { staleAfterMs: null, timeoutMs: 1234 });
  assert.equal(parseQueueSettings({}, ssg.defaults).timeoutMs, 600_000);
});
