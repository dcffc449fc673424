/**
 * Connection floods against a running worker (tests/process/http_edge_test.ts, bench/chaos.ts):
 * many raw TCP clients of one kind, and what the server did with them.
 *
 * @module
 */

/**
 * What each client of a flood does once connected.
 * - `idle`: sends nothing.
 * - `partial`: sends a request line and one header, never the blank line that ends the headers.
 * - `keepalive`: sends one whole request, reads the answer, then sits idle on the connection.
 * - `slowbody`: sends whole headers of a 60 000-byte JSON body, then one byte every 500 ms.
 */
export type FloodKind = "idle" | "partial" | "keepalive" | "slowbody";

/** The outcome of {@linkcode flood}. */
export interface FloodResult {
  kind: FloodKind;
  /** Connections the client opened. */
  opened: number;
  /** Connections refused at connect (the server's cap, or the client's own limit). */
  refused: number;
  /** Connections the server closed while the flood held them. */
  closedByServer: number;
  /** ms from the flood's start to the last close by the server (0 when none). */
  lastCloseMs: number;
}

const enc = new TextEncoder();

/** A connect not answered within this many ms counts as refused (a full accept backlog). */
const CONNECT_WAIT_MS = 2000;

// Deno.connect bounded in time: a listener that has stopped accepting leaves a connect to a full
// backlog waiting for minutes (SYN retries).
async function connectWithin(port: number, ms: number): Promise<Deno.TcpConn> {
  const connecting = Deno.connect({ hostname: "127.0.0.1", port });
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer to connect within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([connecting, late]);
  } catch (err) {
    connecting.then((conn) => conn.close(), () => {});
    throw err;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Open `count` connections of one kind, hold them `holdMs`, then close what is left.
 *
 * @param token the bearer token for `slowbody`'s authenticated route.
 * @param during called while the connections are held (e.g. to sample the server's fds).
 */
export async function flood(
  port: number,
  kind: FloodKind,
  count: number,
  holdMs: number,
  token = "",
  during: () => Promise<void> | void = () => {},
): Promise<FloodResult> {
  const t0 = performance.now();
  const conns: Deno.TcpConn[] = [];
  const closedAt: number[] = [];
  const timers: ReturnType<typeof setInterval>[] = [];
  let refused = 0;
  let refusedInARow = 0;
  for (let i = 0; i < count; i++) {
    let conn: Deno.TcpConn;
    try {
      conn = await connectWithin(port, CONNECT_WAIT_MS);
    } catch {
      refused++;
      // A listener that answers nothing: the rest would wait as long, each.
      if (++refusedInARow >= 20) {
        refused += count - i - 1;
        break;
      }
      continue;
    }
    refusedInARow = 0;
    conns.push(conn);
    const send = (text: string) => conn.write(enc.encode(text)).catch(() => 0);
    if (kind === "partial") send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n");
    if (kind === "keepalive") send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    if (kind === "slowbody") {
      send(
        "POST /internal/ingestion/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\n" +
          `Authorization: Bearer ${token}\r\nContent-Type: application/json\r\n` +
          "Content-Length: 60000\r\n\r\n{",
      );
      timers.push(setInterval(() => send(" "), 500));
    }
    (async () => {
      const buf = new Uint8Array(4096);
      try {
        while ((await conn.read(buf)) !== null) { /* the answer of a keepalive client */ }
      } catch {
        // reset by the server: closed all the same
      }
      closedAt.push(performance.now() - t0);
    })();
  }
  const held = new Promise((r) => setTimeout(r, Math.max(0, holdMs - (performance.now() - t0))));
  await during();
  await held;
  const closedByServer = closedAt.length;
  const lastCloseMs = Math.round(Math.max(0, ...closedAt));
  for (const timer of timers) clearInterval(timer);
  for (const conn of conns) {
    try {
      conn.close();
    } catch {
      // closed by the server already
    }
  }
  return { kind, opened: conns.length, refused, closedByServer, lastCloseMs };
}

/** Open file descriptors and resident memory (MiB) of a process, from /proc. */
export function processUsage(pid: number): { fds: number; rssMiB: number } {
  let fds = 0;
  for (const _ of Deno.readDirSync(`/proc/${pid}/fd`)) fds++;
  const status = Deno.readTextFileSync(`/proc/${pid}/status`);
  const rssKiB = Number(/^VmRSS:\s+(\d+)/m.exec(status)?.[1] ?? 0);
  return { fds, rssMiB: Math.round(rssKiB / 1024) };
}
