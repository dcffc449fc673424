/**
 * Secrets never leave the real `main.ts`: a `DATABASE_URL` it cannot parse stops it with exit 2
 * and a message that names the setting and the fault but not the password; `/readyz` during a
 * database outage names the failed check, not the server's address or the raw error.
 */
import assert from "node:assert/strict";
import { dbTest, waitFor } from "../_db.ts";
import { startProxy } from "../_proxy.ts";
import { spawnWorker } from "../_worker.ts";

const PASSWORD = "Hunter2-s3cret-pw";

for (
  const [fault, url, why] of [
    ["a bad %-escape", `postgres://app:${PASSWORD}%zz@127.0.0.1:5432/x`, /bad %-escape/],
    ["no host", `postgres://app:${PASSWORD}@/x`, /names no host/],
    ["a wrong scheme", `mysql://app:${PASSWORD}@127.0.0.1:5432/x`, /does not start with postgres/],
    ["a bad port", `postgres://app:${PASSWORD}@127.0.0.1:99999/x`, /not a port number/],
  ] as const
) {
  Deno.test(`main.ts refuses a DATABASE_URL with ${fault}: exit 2, the setting named, no password in its output`, async () => {
    const dir = await Deno.makeTempDir({ prefix: "textstack-secrets-" });
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", new URL("../../main.ts", import.meta.url).pathname],
      env: { DATABASE_URL: url, DATA_DIR: dir, PORT: "0", HOST: "127.0.0.1" },
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).output();
    const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
    assert.equal(out.code, 2, text);
    assert.match(text, /Cannot parse DATABASE_URL/);
    assert.match(text, why);
    assert.ok(!text.includes(PASSWORD), text);
    assert.ok(!text.includes(encodeURIComponent(PASSWORD)), text);
  });
}

dbTest(
  "main.ts /readyz during a database outage says the database check failed, without host, port or raw error; the log line is redacted",
  async (db) => {
    // A role whose password is the secret, so the URL carries it on a server that checks
    // passwords (the embedded default) as well as on one that trusts (the machine's).
    const role = `t_secret_${crypto.randomUUID().slice(0, 8)}`;
    await db.sql.unsafe(`create role ${role} login superuser password '${PASSWORD}'`);
    const proxy = startProxy(db.url);
    const withPassword = new URL(proxy.url);
    withPassword.username = role;
    withPassword.password = PASSWORD;
    const worker = spawnWorker(db, { DATABASE_URL: withPassword.toString() });
    try {
      const base = await worker.baseUrl();
      await worker.waitForLog("consumer started", { queue: "ingestion" }, 30_000);
      proxy.cut();
      const body = await waitFor(
        "an unready /readyz",
        async () => {
          const res = await fetch(`${base}/readyz`);
          const text = await res.text();
          return res.status === 503 && JSON.parse(text).checks.database !== "ok" ? text : null;
        },
        15_000,
        200,
      );
      const checks = JSON.parse(body).checks;
      assert.match(checks.database, /^failed: /);
      const port = new URL(proxy.url).port;
      for (const leak of ["127.0.0.1", port, "ECONNREFUSED", "ECONNRESET", "localhost"]) {
        assert.ok(!body.includes(leak), `${leak} in ${body}`);
      }
      const lines = worker.logs.map((l) => JSON.stringify(l)).join("\n");
      assert.ok(!lines.includes(PASSWORD), "the password reached the log");
      proxy.restore();
    } finally {
      worker.child.kill("SIGTERM");
      await worker.exited;
      await proxy.close();
      await db.sql.unsafe(`drop role ${role}`);
    }
  },
);
