/**
 * A small TCP proxy between the worker and PostgreSQL that a test or the chaos matrix controls
 * : black-hole the connections of one role (by `application_name`: bytes stop flowing
 * both ways, nothing closes — a NAT that forgot the flow), drop notifications on the way to the
 * client (a pooler that accepts LISTEN and never delivers), lose every reply to one role while its
 * queries still reach the server (a statement commits and its answer never arrives), or cut
 * everything (close every connection and refuse new ones, as a server that went away).
 *
 * @module
 */

/** One proxied client connection. */
interface Pipe {
  /** `application_name` from the client's startup message ("" until it arrived). */
  app: string;
  client: Deno.TcpConn;
  server: Deno.TcpConn;
  blackholed: boolean;
  /** Server-to-client bytes are dropped; client-to-server still flow. */
  muted: boolean;
}

/** A running proxy. */
export interface PgProxy {
  /** `postgres://` URL that reaches the upstream server through the proxy. */
  url: string;
  /** Stop forwarding (without closing) every current connection whose app name matches. */
  blackhole(app: RegExp): number;
  /**
   * Drop every reply to current connections whose app name matches, while their queries still
   * reach the server: what they run commits, and they never hear it (until {@linkcode cut}).
   */
  muteReplies(app: RegExp): number;
  /**
   * From the next `COMMIT` a matching client sends on, drop every reply to it: the commit
   * happens, its answer is lost (until {@linkcode cut}).
   */
  muteAfterCommit(app: RegExp): void;
  /** Close the connections whose replies are muted (the socket of a lost answer dies). */
  closeMuted(): number;
  /** Drop `NotificationResponse` messages to clients whose app name matches (null: none). */
  dropNotifications(app: RegExp | null): void;
  /** Close every connection and refuse new ones until {@linkcode restore}. */
  cut(): void;
  /** Accept connections again (after {@linkcode cut}). */
  restore(): void;
  /** Current connections' app names. */
  apps(): string[];
  /** Notifications dropped so far. */
  readonly dropped: number;
  close(): Promise<void>;
}

function appName(startup: Uint8Array): string {
  // Int32 length, Int32 protocol, then key\0value\0 pairs.
  const parts = new TextDecoder().decode(startup.subarray(8)).split("\0");
  const i = parts.indexOf("application_name");
  return i >= 0 ? parts[i + 1] ?? "" : "";
}

/**
 * Start a proxy to `upstreamUrl` on a free local port.
 *
 * @example
 * const proxy = await startProxy(db.url);
 * proxy.blackhole(/-listener$/);
 */
export function startProxy(upstreamUrl: string): PgProxy {
  const upstream = new URL(upstreamUrl);
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const pipes = new Set<Pipe>();
  let dropFor: RegExp | null = null;
  let muteCommitFor: RegExp | null = null;
  let refusing = false;
  let dropped = 0;

  async function clientToServer(pipe: Pipe): Promise<void> {
    const buf = new Uint8Array(65536);
    let first = true;
    for (;;) {
      const n = await pipe.client.read(buf).catch(() => null);
      if (n === null) break;
      const chunk = buf.slice(0, n);
      if (first) {
        pipe.app = appName(chunk);
        first = false;
      }
      if (pipe.blackholed) continue;
      // A Query or Parse message whose text is COMMIT (a control byte or the statement name's
      // NUL before it, its own NUL after): its answer and everything after are dropped.
      if (muteCommitFor?.test(pipe.app) && sendsCommit(chunk)) {
        pipe.muted = true;
        muteCommitFor = null;
      }
      await writeAll(pipe.server, chunk).catch(() => {});
    }
    close(pipe);
  }

  async function serverToClient(pipe: Pipe): Promise<void> {
    const buf = new Uint8Array(65536);
    let pending = new Uint8Array(0);
    for (;;) {
      const n = await pipe.server.read(buf).catch(() => null);
      if (n === null) break;
      if (pipe.blackholed || pipe.muted) continue;
      const joined = new Uint8Array(pending.length + n);
      joined.set(pending);
      joined.set(buf.subarray(0, n), pending.length);
      // Split into whole messages: type byte, Int32 length (counting itself).
      let at = 0;
      const out: Uint8Array[] = [];
      while (joined.length - at >= 5) {
        const len = new DataView(joined.buffer, joined.byteOffset + at + 1, 4).getInt32(0);
        if (joined.length - at < 1 + len) break;
        const msg = joined.subarray(at, at + 1 + len);
        if (msg[0] === 0x41 && dropFor?.test(pipe.app)) dropped++;
        else out.push(msg);
        at += 1 + len;
      }
      pending = joined.slice(at);
      for (const msg of out) await writeAll(pipe.client, msg).catch(() => {});
    }
    close(pipe);
  }

  function close(pipe: Pipe): void {
    if (!pipes.delete(pipe)) return;
    try {
      pipe.client.close();
    } catch { /* already closed */ }
    try {
      pipe.server.close();
    } catch { /* already closed */ }
  }

  (async () => {
    for await (const client of listener) {
      if (refusing) {
        client.close();
        continue;
      }
      let server: Deno.TcpConn;
      try {
        server = await Deno.connect({
          hostname: upstream.hostname,
          port: Number(upstream.port || 5432),
        });
      } catch {
        client.close();
        continue;
      }
      if (refusing) {
        client.close();
        server.close();
        continue;
      }
      const pipe: Pipe = { app: "", client, server, blackholed: false, muted: false };
      pipes.add(pipe);
      clientToServer(pipe);
      serverToClient(pipe);
    }
  })().catch(() => {});

  const port = (listener.addr as Deno.NetAddr).port;
  const url = new URL(upstreamUrl);
  url.hostname = "127.0.0.1";
  url.port = String(port);
  return {
    url: url.toString(),
    blackhole(app) {
      let n = 0;
      for (const pipe of pipes) if (app.test(pipe.app)) (pipe.blackholed = true, n++);
      return n;
    },
    muteReplies(app) {
      let n = 0;
      for (const pipe of pipes) if (app.test(pipe.app)) (pipe.muted = true, n++);
      return n;
    },
    muteAfterCommit(app) {
      muteCommitFor = app;
    },
    closeMuted() {
      const muted = [...pipes].filter((p) => p.muted);
      for (const pipe of muted) close(pipe);
      return muted.length;
    },
    dropNotifications(app) {
      dropFor = app;
    },
    cut() {
      refusing = true;
      for (const pipe of [...pipes]) close(pipe);
    },
    restore() {
      refusing = false;
    },
    apps: () => [...pipes].map((p) => p.app),
    get dropped() {
      return dropped;
    },
    async close() {
      refusing = true;
      for (const pipe of [...pipes]) close(pipe);
      listener.close();
      await Promise.resolve();
    },
  };
}

async function writeAll(conn: Deno.TcpConn, data: Uint8Array): Promise<void> {
  let at = 0;
  while (at < data.length) at += await conn.write(data.subarray(at));
}

// Whether a chunk of client messages holds a statement whose whole text is COMMIT: the bytes
// "commit" with a control byte or NUL before them (a length or the statement name's end) and a
// NUL after.
function sendsCommit(chunk: Uint8Array): boolean {
  const text = new TextDecoder().decode(chunk).toLowerCase();
  for (let at = text.indexOf("commit\0"); at > 0; at = text.indexOf("commit\0", at + 1)) {
    if (text.charCodeAt(at - 1) < 0x20) return true;
  }
  return false;
}
