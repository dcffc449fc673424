/**
 * The bearer-token guard of every token-guarded route (`/internal/*`, `/metrics`): Hono's
 * `bearerAuth`, answering every refusal 401 with a JSON `{ error }` and a
 * `WWW-Authenticate: Bearer realm="…"` challenge (RFC 6750 §3).
 *
 * `bearerAuth` alone answers an `Authorization` header of another scheme (`Basic …`) or a
 * malformed bearer value 400. Here: another scheme is a request without a bearer
 * token, so 401 with the bare challenge (RFC 6750 §3.1: no error code for an unsupported method);
 * a malformed token is 401 `error="invalid_token"` (§3.1: "malformed" is invalid_token).
 *
 * @module
 */
import type { Context, MiddlewareHandler } from "hono";
import { bearerAuth } from "hono/bearer-auth";

/**
 * A bearer token as RFC 6750 §2.1 spells it (`b64token`): letters, digits, `-._~+/`, then any
 * `=` padding. It is exactly what `bearerAuth` parses (its `TOKEN_STRINGS`); a token setting
 * outside it would lock every client out ("Malformed bearer token"), so lib/config.ts accepts no
 * other.
 */
export const B64TOKEN = /^[A-Za-z0-9\-._~+/]+=*$/;

/**
 * Guard routes with a bearer token.
 *
 * @param token the token to require (compared in constant time).
 * @param tokenName the setting that holds it, named in the error, e.g. `INTERNAL_API_TOKEN`.
 * @param realm the protection space in the challenge, e.g. `textstack-internal`.
 * @returns a middleware that refuses with 401 (JSON `{ error }`, `WWW-Authenticate: Bearer
 *   realm="<realm>"` plus `error="invalid_token"` for a wrong or malformed token).
 * @example
 * app.use("/metrics", bearerGuard(token, "METRICS_TOKEN", "textstack-metrics"));
 */
export function bearerGuard(token: string, tokenName: string, realm: string): MiddlewareHandler {
  const challenge = `Bearer realm="${realm}"`;
  const invalid = `${challenge}, error="invalid_token"`;
  const bearerScheme = (c: Context) => /^bearer(\s|$)/i.test(c.req.header("authorization") ?? "");
  const refuse = (error: string) =>
    new Response(JSON.stringify({ error }), {
      status: 401,
      headers: { "content-type": "application/json" },
    });
  return bearerAuth({
    token,
    noAuthenticationHeader: {
      wwwAuthenticateHeader: challenge,
      message: { error: `Missing bearer token: send Authorization: Bearer <${tokenName}>` },
    },
    invalidAuthenticationHeader: {
      wwwAuthenticateHeader: (c) => bearerScheme(c) ? invalid : challenge,
      // A Response keeps its own status: 401 where bearerAuth would say 400.
      message: (c) =>
        refuse(
          bearerScheme(c)
            ? "Malformed bearer token"
            : `Unsupported Authorization scheme: send Authorization: Bearer <${tokenName}>`,
        ),
    },
    invalidToken: { wwwAuthenticateHeader: invalid, message: { error: "Invalid bearer token" } },
  });
}
