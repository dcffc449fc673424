/**
 * The HTTP server: the Hono app served by `node:http` through `@hono/node-server`, with the
 * connection bounds `Deno.serve` lacks (docs/http.md).
 *
 * - **Time to headers**: a connection whose request headers are not complete within
 *   `headersTimeoutMs` of its opening is closed.
 * - **Idle between requests**: after a response has been sent, the next request's headers must be
 *   complete within `idleTimeoutMs`, else the connection is closed.
 * - **Open connections**: at most `maxConnections`; beyond it a new connection is refused (closed at
 *   once), so a flood never takes the process to its open-file limit.
 *
 * Only those two waits are bounded, never a request's total time: an event stream or an upload in
 * progress stays open as long as it runs. Deno's `node:http` keeps `headersTimeout` and
 * `requestTimeout` as properties but applies neither (a partial-header client stays open), so both
 * waits are timed here, per socket; `keepAliveTimeout` and `maxConnections` it applies.
 *
 * The app sees `c.env` as `Deno.serve` would hand it: `{ remoteAddr: { transport, hostname, port } }`.
 *
 * @module
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { connect, type Socket } from "node:net";
import { getRequestListener } from "@hono/node-server";
import type { Logger } from "../log.ts";

/** The bounds {@linkcode startServer} applies. All durations are in ms. */
export interface ServerBounds {
  /** From a connection's opening to its first request's complete headers. */
  readonly headersTimeoutMs: number;
  /** From the end of a response to the next request's complete headers on that connection. */
  readonly idleTimeoutMs: number;
  /** Open connections at most; a further one is refused. */
  readonly maxConnections: number;
}

/** What {@linkcode startServer} needs. */
export interface ServerOptions extends ServerBounds {
  readonly hostname: string;
  /** 0 picks a free port. */
  readonly port: number;
  readonly fetch: (
    request: Request,
    env: { remoteAddr: Deno.NetAddr },
  ) => Response | Promise<Response>;
  readonly log: Logger;
}

/** A running server. */
export interface HttpServer {
  /** The bound address. */
  readonly addr: { hostname: string; port: number };
  /** Connections open now. */
  readonly connections: number;
  /**
   * Stop listening, close every idle connection now and each busy one as its response ends.
   *
   * @returns resolves once every connection is closed.
   */
  shutdown(): Promise<void>;
  /** Close every connection that is still open (the end of the shutdown budget). */
  closeAll(): void;
}

interface Tracked {
  /** Requests whose response has not finished. */
  busy: number;
  timer: ReturnType<typeof setTimeout> | undefined;
}

/** How long a connection answered before its body was read may linger before it is destroyed. */
const LINGER_MS = 1000;
/** Warnings of one kind at most once per this many ms. */
const WARN_EVERY_MS = 10_000;

/**
 * Bind and serve.
 *
 * @returns the server once it listens.
 * @throws the bind error (e.g. `EADDRINUSE`) when the address cannot be used.
 * @example
 * const server = await startServer({ hostname: "127.0.0.1", port: 0, fetch: app.fetch, log,
 *   headersTimeoutMs: 30_000, idleTimeoutMs: 30_000, maxConnections: 512 });
 */
export async function startServer(options: ServerOptions): Promise<HttpServer> {
  const { log } = options;
  // Both the runtime's keep-alive timer (Deno's node:http applies it) and the one armed below.
  const idleMs = options.idleTimeoutMs;
  const sockets = new Map<Socket, Tracked>();
  let stopping = false;
  const lastWarn = new Map<string, number>();
  const warnSometimes = (kind: string, fields: Record<string, unknown>, msg: string) => {
    const now = performance.now();
    if (now - (lastWarn.get(kind) ?? -Infinity) < WARN_EVERY_MS) return;
    lastWarn.set(kind, now);
    log.warn(fields, msg);
  };
  const arm = (socket: Socket, state: Tracked, ms: number, what: string) => {
    clearTimeout(state.timer);
    state.timer = setTimeout(() => {
      warnSometimes(
        what,
        { ms, what },
        "closing a connection that sent no request headers in time",
      );
      socket.destroy();
    }, ms);
  };

  const listener = getRequestListener(
    (request, env) => {
      const socket = (env as { incoming: IncomingMessage }).incoming.socket;
      return options.fetch(request, {
        remoteAddr: {
          transport: "tcp",
          hostname: socket.remoteAddress ?? "unknown",
          port: socket.remotePort ?? 0,
        },
      });
    },
    // The adapter's own Request and Response become the globals (its default): a middleware that
    // rebuilds the request (hono's bodyLimit: `new Request(c.req.raw, …)`) needs its constructor.
    { overrideGlobalObjects: true },
  );
  const server: Server = createServer({
    // Applied by Node; kept in step with the timers below for a runtime that applies them.
    headersTimeout: options.headersTimeoutMs,
    keepAliveTimeout: idleMs,
    // Never a bound on a request's total time: streams and uploads run as long as they run.
    requestTimeout: 0,
  }, (req: IncomingMessage, res: ServerResponse) => {
    const socket = req.socket;
    const state = sockets.get(socket);
    if (state) {
      clearTimeout(state.timer);
      state.timer = undefined;
      state.busy++;
      res.on("close", () => {
        state.busy--;
        if (socket.destroyed || state.busy > 0) return;
        if (stopping) socket.destroy();
        else arm(socket, state, idleMs, "idle");
      });
    }
    if (stopping) res.setHeader("connection", "close");
    // Answered before its body was read (413 past the upload cap): the rest is never read, so
    // the connection cannot carry another request. It ends once the answer is out.
    res.on("finish", () => {
      if (req.complete) return;
      socket.end();
      setTimeout(() => socket.destroy(), LINGER_MS).unref?.();
    });
    listener(req, res);
  });
  server.maxConnections = options.maxConnections;
  // The peer ports of the connections accepted since the last probe began (lib's watchdog).
  const accepted = new Set<number>();
  let onAccept = () => {};
  server.on("connection", (socket: Socket) => {
    accepted.add(socket.remotePort ?? -1);
    onAccept();
    const state: Tracked = { busy: 0, timer: undefined };
    sockets.set(socket, state);
    arm(socket, state, options.headersTimeoutMs, "headers");
    socket.on("close", () => {
      clearTimeout(state.timer);
      sockets.delete(socket);
    });
  });
  server.on("drop", () =>
    warnSometimes(
      "drop",
      { maxConnections: options.maxConnections },
      "refusing connections: HTTP_MAX_CONNECTIONS reached",
    ));
  // A malformed request or a reset mid-request: that connection ends, the server goes on.
  server.on("clientError", (_err: Error, socket: Socket) => socket.destroy());
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port, options.hostname, () => {
      server.off("error", reject);
      resolve();
    });
  });
  // Accept errors (EMFILE when the process is short of descriptors) end no process.
  server.on(
    "error",
    (err: Error) => warnSometimes("error", { err: err.message }, "http server error"),
  );
  const address = server.address();
  const addr = typeof address === "object" && address
    ? { hostname: address.address, port: address.port }
    : { hostname: options.hostname, port: options.port };
  const watchdog = setInterval(async () => {
    accepted.clear();
    const ok = await accepts(addr.port, probeHost(options.hostname), accepted, (f) => onAccept = f);
    onAccept = () => {};
    if (ok) return;
    if (stopping) return;
    log.warn(
      { port: addr.port },
      "the HTTP listener stopped accepting (out of file descriptors); listening again",
    );
    server.close();
    server.listen(addr.port, options.hostname);
  }, PROBE_EVERY_MS);
  Deno.unrefTimer(watchdog as unknown as number);

  return {
    addr,
    get connections() {
      return sockets.size;
    },
    shutdown() {
      stopping = true;
      clearInterval(watchdog);
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const [socket, state] of sockets) if (state.busy === 0) socket.destroy();
      return closed;
    },
    closeAll() {
      clearInterval(watchdog);
      for (const socket of sockets.keys()) socket.destroy();
    },
  };
}

/** How often the listener is proved to accept, in ms. */
const PROBE_EVERY_MS = 2000;
/** How long a probe connection may wait to be accepted, in ms. */
const PROBE_WAIT_MS = 1000;

// Where a connection to a server bound to `hostname` can be made from this machine.
function probeHost(hostname: string): string {
  if (hostname === "0.0.0.0") return "127.0.0.1";
  if (hostname === "::") return "::1";
  return hostname;
}

/**
 * Whether the listener still accepts: a loopback connection to it is accepted (seen by the
 * server, which closes it) or closed by the server (refused past the cap) within
 * {@linkcode PROBE_WAIT_MS}. Deno's `node:http` stops accepting for good after one accept fails
 * with "Too many open files": the connection then sits in the kernel's backlog, unanswered. A
 * probe that cannot even connect (this process is itself out of descriptors) counts as accepting:
 * there is nothing to tell yet.
 */
function accepts(
  port: number,
  hostname: string,
  accepted: ReadonlySet<number>,
  watch: (onAccept: () => void) => void,
): Promise<boolean> {
  return new Promise((resolve) => {
    let probe: Socket;
    try {
      probe = connect({ port, host: hostname });
    } catch {
      return resolve(true);
    }
    const done = (ok: boolean) => {
      clearTimeout(timer);
      probe.destroy();
      resolve(ok);
    };
    const timer = setTimeout(() => done(false), PROBE_WAIT_MS);
    const seen = () => {
      if (probe.localPort !== undefined && accepted.has(probe.localPort)) done(true);
    };
    watch(seen);
    probe.on("connect", seen);
    // Closed by the server (refused past the cap), or no connection at all: not deaf.
    probe.on("close", () => done(true));
    probe.on("error", () => done(true));
  });
}

/**
 * The soft limit on open files of this process: from `/proc/self/limits` (Linux, readable only
 * under `--allow-all`: denoland/deno#23703), else as `ulimit -n` in a child shell, which inherits
 * it (needs `--allow-run`, which the start task grants).
 *
 * @returns the limit, or undefined where it cannot be read or is unlimited.
 */
export function openFileLimit(): number | undefined {
  try {
    const text = Deno.readTextFileSync("/proc/self/limits");
    const match = /^Max open files\s+(\d+)/m.exec(text);
    if (match) return Number(match[1]);
  } catch {
    // not readable under explicit permissions: ask a shell
  }
  try {
    const out = new Deno.Command("/bin/sh", { args: ["-c", "ulimit -n"], stderr: "null" })
      .outputSync();
    const text = new TextDecoder().decode(out.stdout).trim();
    return out.success && /^\d+$/.test(text) ? Number(text) : undefined;
  } catch {
    return undefined;
  }
}

/** Descriptors kept back from the connection cap: the pools, the lock sessions, files, workers. */
export const RESERVED_FDS = 64;

/**
 * The connection cap in force: the setting, lowered to half of what the open-file limit leaves
 * after {@linkcode RESERVED_FDS}. Half, because a connection refused past the cap holds its
 * descriptor until it is closed, and in a flood the refused ones pile up beside the open ones;
 * Deno's `node:http` stops accepting for good after an accept fails with "Too many open files"
 * (measured: a plain server at a limit of 256 and a cap of 200 went deaf after 400 idle
 * connections; at a cap of 100 it answered on), so the limit must never be reached.
 *
 * @param setting `HTTP_MAX_CONNECTIONS`.
 * @param limit the process's soft open-file limit, if known.
 * @returns at least 1.
 */
export function connectionCap(setting: number, limit: number | undefined): number {
  if (limit === undefined) return setting;
  return Math.max(1, Math.min(setting, Math.floor((limit - RESERVED_FDS) / 2)));
}
