import assert from "node:assert/strict";
import { dbTest, type TestDb, waitFor } from "../_db.ts";
import { spawnWorker, TEST_TOKEN, type WorkerProcess } from "../_worker.ts";
import { flood, type FloodKind, processUsage } from "../_flood.ts";

async function start(
  db: TestDb,
  env: Record<string, string> = {},
  openFiles?: number,
): Promise<{ worker: WorkerProcess; port: number; dir: string }> {
  const dir = await Deno.makeTempDir({ prefix: "textstack-http-edge-" });
  const worker = spawnWorker(
    db,
    { STORAGE_DIR: `${dir}/storage`, DATA_DIR: dir, SITE_DIR: `${dir}/site`, ...env },
    [],
    undefined,
    { openFiles },
  );
  const port = Number(new URL(await worker.baseUrl()).port);
  return { worker, port, dir };
}

async function stop(worker: WorkerProcess): Promise<void> {
  worker.child.kill("SIGTERM");
  assert.equal((await worker.exited).code, 0);
}

dbTest(
  "main.ts closes a connection without complete headers, or idle after a response, within the timeouts; a slow body and an event stream stay open",
  async (db) => {
    const { worker, port } = await start(db, {
      HTTP_HEADERS_TIMEOUT_MS: "800",
      HTTP_IDLE_TIMEOUT_MS: "800",
    });
    try {
      const stream = await fetch(`http://127.0.0.1:${port}/internal/events`, {
        headers: { authorization: `Bearer ${TEST_TOKEN}` },
      });
      assert.equal(stream.status, 200);
      const reader = stream.body!.getReader();
      await reader.read(); // "ready"
      const floods = await Promise.all(
        (["idle", "partial", "keepalive", "slowbody"] as FloodKind[]).map((kind) =>
          flood(port, kind, 20, 2500, TEST_TOKEN)
        ),
      );
      for (const result of floods) {
        assert.equal(result.opened, 20, JSON.stringify(result));
        if (result.kind === "slowbody") {
          assert.equal(result.closedByServer, 0, JSON.stringify(result));
        } else {
          assert.equal(result.closedByServer, 20, JSON.stringify(result));
          assert.ok(result.lastCloseMs < 2000, JSON.stringify(result));
        }
      }
      // The stream outlived both timeouts three times over and still delivers.
      const next = reader.read();
      const late = await Promise.race([
        next.then(() => "data"),
        new Promise((r) => setTimeout(() => r("open"), 100)),
      ]);
      assert.equal(late, "open");
      await reader.cancel();
    } finally {
      await stop(worker);
    }
  },
);

dbTest(
  "main.ts under an open-file limit of 256 survives floods of 2 × 400 idle, partial-header and slow-body connections, and answers after each",
  async (db) => {
    const { worker, port } = await start(db, {}, 256);
    try {
      await worker.waitForLog("HTTP_MAX_CONNECTIONS lowered to stay under the open-file limit");
      for (const kind of ["idle", "partial", "slowbody"] as FloodKind[]) {
        let fds = 0;
        // Two floods at once: the refused connections pile up beside the open ones.
        const [result] = await Promise.all([
          flood(port, kind, 400, 1500, TEST_TOKEN, async () => {
            await new Promise((r) => setTimeout(r, 500));
            fds = processUsage(worker.child.pid).fds;
          }),
          flood(port, kind, 400, 1500, TEST_TOKEN),
        ]);
        assert.ok(fds < 256, `${kind}: ${fds} fds`);
        // Past the cap a connection is refused or closed at once, never left to exhaust fds.
        assert.ok(result.refused + result.closedByServer > 0, JSON.stringify(result));
        const res = await waitFor(
          `/healthz after the ${kind} flood`,
          () => fetch(`http://127.0.0.1:${port}/healthz`).then((r) => r.ok ? r : null, () => null),
          10_000,
          100,
        );
        await res.body?.cancel();
      }
      assert.equal(worker.logs.filter((l) => String(l.msg).startsWith("stderr: ")).length, 0);
      // The cap, not the accept watchdog, kept it answering: accept never ran out of descriptors.
      const exhausted = worker.logs.filter((l) =>
        /too many open files|EMFILE/i.test(String(l.err ?? ""))
      );
      assert.deepEqual(exhausted, [], "the flood exhausted the descriptors");
    } finally {
      await stop(worker);
    }
  },
);

dbTest(
  "POST /internal/user-books past MAX_UPLOAD_BYTES answers 413 while the client is still sending, closes the connection and leaves no file",
  async (db) => {
    const { worker, port, dir } = await start(db, { MAX_UPLOAD_BYTES: "1048576" });
    try {
      const conn = await Deno.connect({ hostname: "127.0.0.1", port });
      const enc = new TextEncoder();
      const chunk = (data: Uint8Array) =>
        new Uint8Array([
          ...enc.encode(`${data.length.toString(16)}\r\n`),
          ...data,
          ...enc.encode("\r\n"),
        ]);
      await conn.write(enc.encode(
        "POST /internal/user-books HTTP/1.1\r\nHost: 127.0.0.1\r\n" +
          `Authorization: Bearer ${TEST_TOKEN}\r\n` +
          "Content-Type: multipart/form-data; boundary=B0UND\r\nTransfer-Encoding: chunked\r\n\r\n",
      ));
      await conn.write(chunk(enc.encode(
        '--B0UND\r\nContent-Disposition: form-data; name="owner_id"\r\n\r\n7\r\n' +
          '--B0UND\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\n' +
          "Content-Type: text/plain\r\n\r\n",
      )));
      let answer = "";
      let closed = false;
      const reading = (async () => {
        const buf = new Uint8Array(4096);
        try {
          for (let n; (n = await conn.read(buf)) !== null;) {
            answer += new TextDecoder().decode(buf.subarray(0, n));
          }
        } catch {
          // reset: closed
        }
        closed = true;
      })();
      // The client would send forever (an endless upload); the server must stop it.
      const piece = chunk(new Uint8Array(64 * 1024).fill(0x61));
      let sent = 0;
      const t0 = performance.now();
      while (!closed && performance.now() - t0 < 8000) {
        try {
          await conn.write(piece);
          sent += piece.length;
        } catch {
          break;
        }
      }
      await Promise.race([reading, new Promise((r) => setTimeout(r, 2000))]);
      try {
        conn.close();
      } catch {
        // closed by the server
      }
      assert.match(answer, /^HTTP\/1\.1 413 /);
      assert.match(answer, /Upload exceeds MAX_UPLOAD_BYTES \(1048576 bytes\)/);
      assert.ok(closed, "the server closed the connection");
      assert.ok(performance.now() - t0 < 8000, `refused after ${sent} bytes, not at the cap`);
      const left = [];
      try {
        for (const entry of Deno.readDirSync(`${dir}/storage/uploads`)) left.push(entry.name);
      } catch {
        // no uploads folder: nothing left
      }
      assert.deepEqual(left, []);
    } finally {
      await stop(worker);
    }
  },
);

dbTest(
  "every /internal route with an :id takes ids up to 2^63 − 1, and answers 2^63 and above with a JSON 400 or 404",
  async (db) => {
    const { worker, port } = await start(db);
    try {
      const base = `http://127.0.0.1:${port}`;
      const auth = { authorization: `Bearer ${TEST_TOKEN}`, "content-type": "application/json" };
      const doc = await (await fetch(`${base}/internal/openapi.json`, { headers: auth })).json();
      const routes: [string, string][] = [];
      for (const [path, ops] of Object.entries(doc.paths as Record<string, object>)) {
        if (!path.includes("{id}")) continue;
        for (const method of Object.keys(ops)) routes.push([method.toUpperCase(), path]);
      }
      assert.ok(routes.length >= 10, JSON.stringify(routes));
      const call = async (method: string, path: string, id: string) => {
        const res = await fetch(`${base}${path.replace("{id}", id)}`, {
          method,
          headers: auth,
          body: method === "GET" ? undefined : "{}",
        });
        const text = await res.text();
        return { status: res.status, error: String(JSON.parse(text).error ?? "") };
      };
      // Generated ids of every length up to 19 digits, and the bounds.
      const good = ["1", "9223372036854775807", "9223372036854775806", "1000000000000000000"];
      for (let digits = 2; digits <= 19; digits += 3) good.push("9".repeat(digits - 1) + "1");
      const bad = [
        "9223372036854775808",
        "18446744073709551616",
        "99999999999999999999",
        "0",
        "1".repeat(40),
      ];
      for (const [method, path] of routes) {
        for (const id of good) {
          const { status, error } = await call(method, path, id);
          assert.ok(status < 500, `${method} ${path} ${id}: ${status} ${error}`);
          assert.ok(
            !(status === 400 && /\bid\b/i.test(error)),
            `${method} ${path} refused id ${id}: ${error}`,
          );
        }
        for (const id of bad) {
          const { status, error } = await call(method, path, id);
          assert.ok(status === 400 || status === 404, `${method} ${path} ${id}: ${status}`);
          assert.ok(error.length > 0, `${method} ${path} ${id}: no JSON error`);
        }
      }
    } finally {
      await stop(worker);
    }
  },
);
