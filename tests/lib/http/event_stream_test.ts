/**
 * The event streams behind proxies (`/internal/events`, `/admin/events`): the headers a proxy
 * needs not to buffer them, a comment heartbeat so an idle stream is never silent, `retry:` and
 * `id:` fields, and a reconnect with `Last-Event-ID` that replays what the buffer still holds or
 * says `reset` — the last with Deno's own `EventSource` through a real server and a TCP relay that
 * cuts the connection.
 *
 * @module
 */
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { EventHub, type JobEvent } from "../../../lib/events.ts";
import { Lifecycle } from "../../../lib/lifecycle.ts";
import { createLogger } from "../../../lib/log.ts";
import { RECONNECT_MS } from "../../../lib/http/api.ts";
import { adminRoutes } from "../../../lib/admin/dashboard.tsx";
import { StatsCache } from "../../../lib/admin/stats_cache.ts";
import { testApi, testControl } from "../../_api.ts";
import { dbTest } from "../../_db.ts";
import { ingestionContext } from "../../_ingestion.ts";
import { ingestionView } from "../../../queues/ingestion/view.ts";

const TOKEN = "stream-test-token-0123456789";
const auth = { authorization: `Bearer ${TOKEN}` };
const log = createLogger("silent");

const event = (id: number): JobEvent => ({
  queue: "ingestion",
  id: String(id),
  transition: "claimed",
  status: "Processing",
  attempt: 1,
});

function api(events: EventHub, heartbeatMs?: number) {
  const lifecycle = new Lifecycle(log, 2000);
  return {
    app: testApi({ log, events }, TOKEN, { routes: {}, lifecycle, heartbeatMs }),
    lifecycle,
  };
}

/** The raw SSE text of a response until `until` holds for it or `ms` pass. */
async function readFor(
  res: Response,
  ms: number,
  until: (text: string) => boolean = () => false,
): Promise<string> {
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  const deadline = sleep(ms).then(() => null);
  try {
    while (!until(text)) {
      const chunk = await Promise.race([reader.read(), deadline]);
      if (!chunk || chunk.done) break;
      text += chunk.value;
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
  return text;
}

/** `[event, id]` of every message in an SSE text. */
function messages(text: string): Array<[string, string | undefined]> {
  return text.split("\n\n").filter((block) => /^(event|data):/m.test(block)).map((block) => [
    /^event: (.*)$/m.exec(block)?.[1] ?? "message",
    /^id: (.*)$/m.exec(block)?.[1],
  ]);
}

Deno.test("/internal/events: X-Accel-Buffering no, no-cache, ready with retry:, GET and HEAD", async () => {
  const events = new EventHub();
  const { app, lifecycle } = api(events);
  for (const method of ["GET", "HEAD"]) {
    const res = await app.request("/internal/events", { method, headers: auth });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("x-accel-buffering"), "no", method);
    assert.equal(res.headers.get("cache-control"), "no-cache", method);
    if (method === "GET") {
      const text = await readFor(res, 2000, (t) => t.includes("event: ready"));
      assert.match(
        text,
        new RegExp(`^event: ready\\ndata: \\{\\}\\nretry: ${RECONNECT_MS}\\n`, "m"),
      );
    }
  }
  await lifecycle.shutdown();
});

Deno.test("/internal/events: an idle stream sends a comment heartbeat every heartbeatMs", async () => {
  const events = new EventHub();
  const { app, lifecycle } = api(events, 100);
  const res = await app.request("/internal/events", { headers: auth });
  const text = await readFor(res, 550);
  const beats = text.match(/^: heartbeat\n\n/gm)?.length ?? 0;
  assert.ok(beats >= 3 && beats <= 6, `${beats} heartbeats in 550 ms at 100 ms: ${text}`);
  // A comment is not an event: the client's parser sees only `ready`.
  assert.deepEqual(messages(text).map(([name]) => name), ["ready"]);
  await lifecycle.shutdown();
});

Deno.test(
  "/internal/events: Last-Event-ID replays the events after it that the buffer holds, then live ones, none twice",
  async () => {
    const events = new EventHub(8);
    const { app, lifecycle } = api(events);
    const first = await app.request("/internal/events", { headers: auth });
    await sleep(50);
    for (let i = 1; i <= 3; i++) events.publish(event(i));
    const seen = messages(await readFor(first, 2000, (t) => t.split("event: claimed").length > 3));
    assert.deepEqual(seen.map(([, id]) => id), [
      undefined,
      ...[1, 2, 3].map((n) => `${events.epoch}-${n}`),
    ]);
    // Cut after the second; two more are published while the client is away.
    for (let i = 4; i <= 5; i++) events.publish(event(i));
    const again = await app.request("/internal/events", {
      headers: { ...auth, "last-event-id": `${events.epoch}-2` },
    });
    setTimeout(() => events.publish(event(6)), 100);
    const resumed = messages(
      await readFor(again, 2000, (t) => t.includes(`id: ${events.epoch}-6`)),
    );
    assert.deepEqual(resumed.map(([name, id]) => [name, id?.split("-")[1]]), [
      ["ready", undefined],
      ["claimed", "3"],
      ["claimed", "4"],
      ["claimed", "5"],
      ["claimed", "6"],
    ]);
    await lifecycle.shutdown();
  },
);

Deno.test(
  "/internal/events: a Last-Event-ID the buffer cannot answer (too old, another process's, unreadable) gets reset",
  async () => {
    const events = new EventHub(4);
    const { app, lifecycle } = api(events);
    for (let i = 1; i <= 10; i++) events.publish(event(i));
    for (
      const lastId of [`${events.epoch}-5`, "0badc0de-9", "garbage", `${events.epoch}-11`]
    ) {
      const res = await app.request("/internal/events", {
        headers: { ...auth, "last-event-id": lastId },
      });
      const text = await readFor(res, 2000, (t) => t.includes("event: reset"));
      assert.deepEqual(messages(text).map(([name]) => name), ["ready", "reset"], lastId);
      assert.match(text, /Cannot replay the events after this id/);
    }
    // The oldest id the buffer still answers: 6 is right before the oldest kept (7).
    const ok = await app.request("/internal/events", {
      headers: { ...auth, "last-event-id": `${events.epoch}-6` },
    });
    const text = await readFor(ok, 2000, (t) => t.includes(`${events.epoch}-10`));
    assert.deepEqual(messages(text).map(([, id]) => id?.split("-")[1]), [
      undefined,
      "7",
      "8",
      "9",
      "10",
    ]);
    await lifecycle.shutdown();
  },
);

dbTest("/admin/events has the same headers, heartbeat and replay", async (db) => {
  const ctx = await ingestionContext(db);
  const lifecycle = new Lifecycle(ctx.log, 2000);
  const app = adminRoutes({
    token: TOKEN,
    views: [ingestionView],
    cache: new StatsCache({ sql: db.sql, schema: db.schema, views: [ingestionView], log: ctx.log }),
    ctx,
    control: testControl(ctx, db.schema),
    locks: new Map(),
    events: ctx.events,
    lifecycle,
    log: ctx.log,
    heartbeatMs: 100,
  });
  const origin = "http://127.0.0.1:8080";
  const login = await app.request(`${origin}/admin/login`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", origin },
    body: new URLSearchParams({ token: TOKEN }).toString(),
  }, { remoteAddr: { transport: "tcp", hostname: "127.0.0.1", port: 40000 } });
  const cookie = (login.headers.get("set-cookie") ?? "").split(";")[0];
  ctx.events.publish(event(1));
  ctx.events.publish(event(2));
  const res = await app.request(`${origin}/admin/events`, {
    headers: { cookie, "last-event-id": `${ctx.events.epoch}-1` },
  });
  assert.equal(res.status, 200);
  assert.equal(res.headers.get("x-accel-buffering"), "no");
  assert.equal(res.headers.get("cache-control"), "no-cache");
  const text = await readFor(res, 400);
  assert.deepEqual(messages(text).map(([name, id]) => [name, id?.split("-")[1]]), [
    ["ready", undefined],
    ["claimed", "2"],
  ]);
  assert.ok((text.match(/^: heartbeat$/gm)?.length ?? 0) >= 2, text);
  await lifecycle.shutdown();
});

// An HTTP proxy in front of the API that adds the bearer token (EventSource sends no headers of
// its own but Last-Event-ID) and can cut every stream it carries, as a proxy's idle timeout does.
function cuttingProxy(upstream: string) {
  const open = new Set<() => void>();
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    const headers = new Headers(req.headers);
    headers.set("authorization", auth.authorization);
    const upstreamAbort = new AbortController();
    const res = await fetch(`${upstream}${new URL(req.url).pathname}`, {
      headers,
      signal: upstreamAbort.signal,
    });
    const reader = res.body!.getReader();
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        open.add(() => {
          upstreamAbort.abort();
          controller.error(new Error("cut by the proxy"));
        });
      },
      async pull(controller) {
        const { value, done } = await reader.read().catch(() => ({ value: undefined, done: true }));
        if (done) controller.close();
        else controller.enqueue(value);
      },
      cancel: () => upstreamAbort.abort(),
    });
    return new Response(body, { status: res.status, headers: res.headers });
  });
  return {
    url: `http://127.0.0.1:${(server.addr as Deno.NetAddr).port}`,
    cut() {
      for (const cut of open) cut();
      open.clear();
    },
    close: () => server.shutdown(),
  };
}

Deno.test(
  "EventSource through a proxy that cuts the stream resumes with Last-Event-ID and misses nothing",
  async () => {
    const events = new EventHub();
    const { app, lifecycle } = api(events);
    const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, app.fetch);
    const proxy = cuttingProxy(`http://127.0.0.1:${(server.addr as Deno.NetAddr).port}`);
    const got: string[] = [];
    let readies = 0;
    const source = new EventSource(`${proxy.url}/internal/events`);
    source.addEventListener("ready", () => readies++);
    source.addEventListener("claimed", (e) => got.push((e as MessageEvent).lastEventId));
    const until = async (what: string, check: () => boolean, ms = 8000) => {
      const end = performance.now() + ms;
      while (!check()) {
        if (performance.now() > end) throw new Error(`timed out waiting for ${what}`);
        await sleep(20);
      }
    };
    try {
      await until("ready", () => readies === 1);
      events.publish(event(1));
      events.publish(event(2));
      await until("two events", () => got.length === 2);
      proxy.cut();
      // Published while the stream is cut: the reconnect must replay them.
      events.publish(event(3));
      events.publish(event(4));
      await until("the reconnect", () => readies === 2, RECONNECT_MS + 5000);
      events.publish(event(5));
      await until("five events", () => got.length === 5);
      assert.deepEqual(got.map((id) => id.split("-")[1]), ["1", "2", "3", "4", "5"]);
    } finally {
      source.close();
      proxy.cut();
      await proxy.close();
      await lifecycle.shutdown();
      await server.shutdown();
    }
  },
);
