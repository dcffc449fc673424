/**
 * The rate limit on `POST /admin/login`: at most {@linkcode LOGIN_ATTEMPTS}
 * refused sign-ins per client address in a {@linkcode LOGIN_WINDOW_MS} window; past it, every
 * sign-in from that address (the right token too) is answered 429 with `Retry-After` until the
 * window ends. A successful sign-in is not counted. Counting is `hono-rate-limiter`'s, in its
 * in-memory store (a fixed window per address; an address idle for a whole window is forgotten),
 * which suits this single-process worker.
 *
 * The address is the TCP peer as `Deno.serve` saw it, never `X-Forwarded-For` (any client can
 * write that). Behind a reverse proxy every client is the proxy, so they share one budget: a
 * stricter limit, not a looser one. An IPv6 peer counts by its /64, the block one host is usually
 * given, so a host cannot mint a fresh budget per address (nor grow the store without bound).
 *
 * @module
 */
import type { Context, MiddlewareHandler } from "hono";
import { MemoryStore, rateLimiter } from "hono-rate-limiter";

/** Refused sign-ins allowed per client address in one window. */
export const LOGIN_ATTEMPTS = 10;
/** The window, in ms (15 min). */
export const LOGIN_WINDOW_MS = 15 * 60 * 1000;

/** What {@linkcode loginLimit} needs. */
export interface LoginLimitOptions {
  /** Refused sign-ins allowed per address per window (default {@linkcode LOGIN_ATTEMPTS}). */
  attempts?: number;
  /** The window in ms (default {@linkcode LOGIN_WINDOW_MS}). */
  windowMs?: number;
  /**
   * Answers a sign-in past the limit; `Retry-After` (seconds to the window's end) is already set
   * on the context and stays on the answer.
   */
  onLimited: (c: Context, key: string) => Response | Promise<Response>;
}

/**
 * The middleware to put before the sign-in handler.
 *
 * @returns a Hono middleware; it answers 429 (via `onLimited`) past the limit, else runs the
 *   handler and counts its answer when it is a refusal (status 400 or more).
 * @example
 * app.post("/admin/login", loginLimit({ onLimited: (c) => c.text("Too many", 429) }), login);
 */
export function loginLimit(options: LoginLimitOptions): MiddlewareHandler {
  return rateLimiter({
    windowMs: options.windowMs ?? LOGIN_WINDOW_MS,
    limit: options.attempts ?? LOGIN_ATTEMPTS,
    // RateLimit-* headers on every sign-in answer, and Retry-After on a refusal.
    standardHeaders: "draft-6",
    skipSuccessfulRequests: true,
    keyGenerator: clientKey,
    handler: (c) => options.onLimited(c, clientKey(c)),
    store: new MemoryStore(),
  });
}

/**
 * The client's address for counting: the TCP peer (`Deno.serve`'s `info.remoteAddr`, which Hono
 * passes as `c.env`), an IPv6 one as its /64 (`2001:db8:0:1::/64`); `unknown` without a peer
 * (an in-process `app.request`).
 */
export function clientKey(c: Context): string {
  const addr = (c.env as Partial<Deno.ServeHandlerInfo> | undefined)?.remoteAddr;
  const host = addr && "hostname" in addr ? addr.hostname : "unknown";
  return host.includes(":") ? ipv6Block(host) : host;
}

// "2001:db8::1" → "2001:db8:0:0::/64"; an IPv4-mapped address ("::ffff:10.0.0.1") is its IPv4.
function ipv6Block(address: string): string {
  const bare = address.replace(/^\[|\]$/g, "").split("%")[0].toLowerCase();
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(bare);
  if (mapped) return mapped[1];
  const [head, tail] = bare.split("::");
  const left = head ? head.split(":") : [];
  const right = tail ? tail.split(":") : [];
  const groups = tail === undefined
    ? left
    : [...left, ...Array(Math.max(0, 8 - left.length - right.length)).fill("0"), ...right];
  return `${groups.slice(0, 4).map((g) => g.replace(/^0+(?=.)/, "")).join(":")}::/64`;
}
