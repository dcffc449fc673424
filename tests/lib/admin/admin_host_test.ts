import assert from "node:assert/strict";
import { testControl } from "../../_api.ts";
import { adminRoutes } from "../../../lib/admin/dashboard.tsx";
import { adminHostAllowed } from "../../../lib/admin/access.tsx";
import { Lifecycle } from "../../../lib/lifecycle.ts";
import { StatsCache } from "../../../lib/admin/stats_cache.ts";
import { ingestionView } from "../../../queues/ingestion/view.ts";
import { dbTest, type TestDb } from "../../_db.ts";
import { ingestionContext } from "../../_ingestion.ts";

const TOKEN = "admin-host-token-0123456789";

async function setup(db: TestDb, origin?: string) {
  const ctx = await ingestionContext(db);
  const views = [ingestionView];
  const cache = new StatsCache({ sql: db.sql, schema: db.schema, views, log: ctx.log });
  const app = adminRoutes({
    token: TOKEN,
    views,
    cache,
    ctx,
    locks: new Map(),
    events: ctx.events,
    lifecycle: new Lifecycle(ctx.log, 2000),
    log: ctx.log,
    control: testControl(ctx, db.schema),
    origin,
  });
  // A sign-in as a browser sends it: the URL (and so the Host) and the Origin it came from.
  const signIn = (url: string, origin: string) =>
    app.request(url, {
      method: "POST",
      headers: {
        host: new URL(url).host,
        origin,
        "content-type": "application/x-www-form-urlencoded",
      },
      body: new URLSearchParams({ token: TOKEN }).toString(),
    }, { remoteAddr: { transport: "tcp", hostname: "127.0.0.1", port: 40000 } });
  return { app, signIn };
}

function rng(seed: number): () => number {
  return () => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed / 0x7fffffff;
  };
}

Deno.test("adminHostAllowed: loopback names with any port, the ADMIN_ORIGIN host, nothing else (generated hosts)", () => {
  const random = rng(1035);
  const port = () => (random() < 0.3 ? "" : `:${1 + Math.floor(random() * 65535)}`);
  const names = ["evil.example", "localhost.evil.example", "127.0.0.1.nip.io", "10.0.0.5", "[::2]"];
  for (let i = 0; i < 300; i++) {
    for (const loopback of ["localhost", "LOCALHOST", "127.0.0.1", "[::1]"]) {
      assert.ok(adminHostAllowed(`${loopback}${port()}`), loopback);
    }
    const other = names[i % names.length] + port();
    assert.ok(!adminHostAllowed(other), other);
    assert.ok(!adminHostAllowed(other, "https://ops.example.com"), other);
  }
  assert.ok(adminHostAllowed("ops.example.com", "https://ops.example.com"));
  assert.ok(adminHostAllowed("ops.example.com:8443", "https://ops.example.com:8443"));
  assert.ok(!adminHostAllowed("ops.example.com:8443", "https://ops.example.com"));
});

dbTest(
  "/admin refuses a rebinding-style Host + Origin pair (403) that a same-origin check alone passes; loopback and ADMIN_ORIGIN sign in",
  async (db) => {
    const { app, signIn } = await setup(db);
    const rebound = await signIn(
      "http://evil.example:8787/admin/login",
      "http://evil.example:8787",
    );
    assert.equal(rebound.status, 403);
    const page = await app.request("http://evil.example:8787/admin", {
      headers: { host: "evil.example:8787" },
    });
    assert.equal(page.status, 403);
    for (const base of ["http://localhost:8080", "http://127.0.0.1:43210", "http://[::1]:8787"]) {
      assert.equal((await signIn(`${base}/admin/login`, base)).status, 303, base);
    }
    const behind = await setup(db, "https://ops.example.com");
    // Behind an https proxy: the worker sees http, the browser's Origin is https.
    const proxied = await behind.signIn(
      "http://ops.example.com/admin/login",
      "https://ops.example.com",
    );
    assert.equal(proxied.status, 303);
    const rebound2 = await behind.signIn(
      "http://evil.example/admin/login",
      "http://evil.example",
    );
    assert.equal(rebound2.status, 403);
  },
);
