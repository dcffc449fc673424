/**
 * Who may reach the dashboard, and how they sign in. {@linkcode guardRequests} puts in front of
 * every `/admin` request `hono/secure-headers` (a CSP of this origin's own files only, and
 * `X-Frame-Options: DENY`), the body limit, the Host allow-list ({@linkcode adminHostAllowed};
 * DNS rebinding) and `hono/csrf`. {@linkcode mountSignIn} adds the login form (rate-limited per
 * client address, lib/admin/login_limit.ts), the session check that every later route passes, and
 * sign-out; the session is a cookie holding a session id from a {@linkcode SessionStore}, signed
 * with HMAC-SHA256 under a key derived from the token (never the token itself).
 *
 * @module
 */
import type { Hono, MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import { csrf } from "hono/csrf";
import { deleteCookie, getSignedCookie, setSignedCookie } from "hono/cookie";
import { secureHeaders } from "hono/secure-headers";
import { timingSafeEqual } from "hono/utils/buffer";
import type { Logger } from "../log.ts";
import { LoginPage, MessagePage } from "./pages.tsx";
import { SessionStore } from "./session.ts";
import { clientKey, loginLimit } from "./login_limit.ts";

/** The session cookie's name. */
export const SESSION_COOKIE = "textstack_admin";
/** How long a login lasts, in seconds. */
export const SESSION_SECONDS = 12 * 3600;
/**
 * Largest `/admin` request body, in bytes (413 above it, before it is read): the sign-in form and
 * the retry button are far smaller, and the sign-in form is open to anyone who reaches the port.
 */
export const ADMIN_MAX_BODY_BYTES = 4 * 1024;

/** What {@linkcode guardRequests} and {@linkcode mountSignIn} read (part of the dashboard's deps). */
export interface AccessDeps {
  /** The token the login form takes. */
  token: string;
  /**
   * The sign-in rate limit (lib/admin/login_limit.ts): refused sign-ins per address per window;
   * the defaults unless a test sets them.
   */
  loginLimit?: { attempts?: number; windowMs?: number };
  /**
   * `ADMIN_ORIGIN`: the origin the dashboard is reached at through a public name or a proxy, e.g.
   * `https://ops.example.com`; its host joins the Host allow-list and it passes the CSRF check.
   */
  origin?: string;
  /** Where refused and rate-limited sign-ins are reported. */
  log: Logger;
}

// The loopback names, with any port: what a browser on this machine (or on the host of a
// container whose port is published) sends as Host.
const LOOPBACK_HOST = /^(localhost|127\.0\.0\.1|\[::1\])(:\d{1,5})?$/i;

/**
 * Whether `/admin` answers a request with this Host: a loopback name with any port, or the host
 * (and port) of `ADMIN_ORIGIN`. Anything else is a name this worker was not set up to be
 * reached at, such as a DNS-rebinding page's own name, whose Host and Origin would agree and so
 * pass a same-origin CSRF check.
 *
 * @param host the request's Host header (or the host of its URL).
 * @param origin `ADMIN_ORIGIN`, if set.
 */
export function adminHostAllowed(host: string, origin?: string): boolean {
  if (LOOPBACK_HOST.test(host)) return true;
  return origin !== undefined && host.toLowerCase() === new URL(origin).host.toLowerCase();
}

/**
 * Put the checks every `/admin` request passes first on `app`: the security headers, the body
 * limit (413), the Host allow-list (403) and the CSRF check (403), in that order.
 *
 * @param app the dashboard's app, before any route.
 * @param deps `origin` (`ADMIN_ORIGIN`), if set.
 */
export function guardRequests(app: Hono, deps: Pick<AccessDeps, "origin">): void {
  // Before anything reads a body (the sign-in form needs no session): a body past the limit is
  // refused unread, as the 64 KiB limit under /internal.
  const limit = bodyLimit({
    maxSize: ADMIN_MAX_BODY_BYTES,
    onError: (c) =>
      c.html(
        <MessagePage
          title="Too large"
          message={`The request body exceeds ${ADMIN_MAX_BODY_BYTES} bytes`}
        />,
        413,
      ),
  });
  // First, so every answer under /admin carries them: a CSP that allows only this
  // origin's own files (the style and the live script are served below, never inline), no
  // framing (clickjacking the retry button), no sniffing. HSTS is left to the https proxy: the
  // worker itself speaks plain http.
  const secure = secureHeaders({
    contentSecurityPolicy: {
      defaultSrc: ["'none'"],
      scriptSrc: ["'self'"],
      styleSrc: ["'self'"],
      imgSrc: ["'self'"],
      connectSrc: ["'self'"],
      formAction: ["'self'"],
      frameAncestors: ["'none'"],
      baseUri: ["'none'"],
    },
    xFrameOptions: "DENY",
    strictTransportSecurity: false,
  });
  app.use("/admin/*", secure);
  app.use("/admin", secure);
  app.use("/admin/*", limit);
  app.use("/admin", limit);
  // Before the CSRF check: the check compares Origin with the request's own URL, which the Host
  // header makes; only a Host on the allow-list makes that comparison mean "this dashboard".
  const hostCheck: MiddlewareHandler = async (c, next) => {
    const host = c.req.header("host") ?? new URL(c.req.url).host;
    if (adminHostAllowed(host, deps.origin)) return await next();
    return c.html(
      <MessagePage
        title="Wrong host"
        message="This dashboard answers on localhost only, or at the origin set in ADMIN_ORIGIN"
      />,
      403,
    );
  };
  app.use("/admin/*", hostCheck);
  app.use("/admin", hostCheck);
  // Same origin as the request's URL (its Host is allowed above), or ADMIN_ORIGIN itself: behind
  // an https proxy the browser's Origin is https:// while the worker is reached over http.
  const sameOrigin = csrf({
    origin: (origin, c) => origin === new URL(c.req.url).origin || origin === deps.origin,
  });
  app.use("/admin/*", sameOrigin);
  app.use("/admin", sameOrigin);
}

/**
 * Add the sign-in form, the session check every route added after it passes (a GET is sent to
 * the form, anything else is 401), and sign-out to `app`.
 *
 * @param app the dashboard's app, after {@linkcode guardRequests} and the static files.
 * @param deps the token the form takes, the rate limit, the log.
 */
export function mountSignIn(app: Hono, deps: AccessDeps): void {
  // A key of its own: a leaked cookie signature says nothing about the token.
  const secret = crypto.subtle.digest(
    "SHA-256",
    new TextEncoder().encode(`textstack-admin-session\u0000${deps.token}`),
  );
  const sessions = new SessionStore(SESSION_SECONDS * 1000);

  // The session id in the request's cookie, when its signature holds (else undefined).
  const sessionId = async (c: Parameters<MiddlewareHandler>[0]): Promise<string | undefined> => {
    const value = await getSignedCookie(c, await secret, SESSION_COOKIE);
    return typeof value === "string" ? value : undefined;
  };
  const signedIn = async (c: Parameters<MiddlewareHandler>[0]): Promise<boolean> =>
    sessions.valid(await sessionId(c));

  app.get("/admin/login", async (c) => {
    if (await signedIn(c)) return c.redirect("/admin", 303);
    return c.html(<LoginPage />);
  });

  // Refused sign-ins are counted per client address; past the limit, 429 with Retry-After, so
  // guessing the token is bounded.
  const limited = loginLimit({
    ...deps.loginLimit,
    onLimited: (c, client) => {
      deps.log.warn(
        { client, retryAfterS: Number(c.res.headers.get("retry-after")) },
        "admin login rate-limited",
      );
      return c.html(
        <MessagePage
          title="Too many sign-in attempts"
          message={`Too many refused sign-ins from this address: try again in ${
            c.res.headers.get("retry-after")
          } s`}
        />,
        429,
      );
    },
  });

  app.post("/admin/login", limited, async (c) => {
    const form = await c.req.parseBody();
    const given = typeof form.token === "string" ? form.token : "";
    if (!(await timingSafeEqual(given, deps.token))) {
      deps.log.warn(
        { client: clientKey(c), forwardedFor: c.req.header("x-forwarded-for") ?? null },
        "admin login refused",
      );
      return c.html(<LoginPage error="Wrong token" />, 401);
    }
    await setSignedCookie(
      c,
      SESSION_COOKIE,
      sessions.create(),
      await secret,
      {
        httpOnly: true,
        sameSite: "Strict",
        path: "/admin",
        maxAge: SESSION_SECONDS,
        secure: new URL(c.req.url).protocol === "https:" ||
          c.req.header("x-forwarded-proto") === "https",
      },
    );
    return c.redirect("/admin", 303);
  });

  // Every route added after this (sign-out, the dashboard's pages) needs the session cookie.
  const requireSession: MiddlewareHandler = async (c, next) => {
    if (await signedIn(c)) return await next();
    if (c.req.method === "GET" && c.req.path !== "/admin/events") {
      return c.redirect("/admin/login", 303);
    }
    return c.html(<MessagePage title="Sign in first" message="Your session has ended." />, 401);
  };
  app.use("/admin", requireSession);
  app.use("/admin/*", requireSession);

  // Ends the session itself, not only the browser's copy of it: the old cookie opens nothing.
  app.post("/admin/logout", async (c) => {
    sessions.revoke(await sessionId(c));
    deleteCookie(c, SESSION_COOKIE, { path: "/admin" });
    return c.redirect("/admin/login", 303);
  });
}
