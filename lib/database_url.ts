/**
 * `DATABASE_URL` read the way libpq reads a connection URI, into the options postgres.js takes:
 * a host list (`postgres://u:p@h1:5432,h2:5433/db?target_session_attrs=read-write`), a local
 * socket directory (`postgres:///db?host=/var/run/postgresql`, or the directory %-escaped as the
 * host: `postgres://u@%2Fvar%2Frun%2Fpostgresql/db`), bracketed IPv6 hosts. postgres.js 3.4.9
 * parses its URL argument with `new URL()` after cutting the host list down to its first host, so
 * it cannot be handed these forms as a string: it sends `host` as a server setting and looks the
 * %-escaped directory up in DNS. {@linkcode driverOptions} gives it hosts, ports and the socket path
 * as options instead, and the rest of the query string as before.
 *
 * Pure (no driver import): lib/config.ts checks the URL with it before anything starts.
 *
 * @module
 */

/** Where and how to connect, from a `DATABASE_URL`. */
export interface DatabaseTarget {
  /** TCP hosts, in the order they are tried; empty for a local socket. IPv6 without brackets. */
  readonly hosts: readonly string[];
  /** One port per host (or the socket's port, which names the socket file). */
  readonly ports: readonly number[];
  /** The socket file (`<dir>/.s.PGSQL.<port>`) for a local-socket URL; undefined for TCP. */
  readonly socketPath: string | undefined;
  readonly user: string | undefined;
  readonly password: string | undefined;
  readonly database: string | undefined;
  /**
   * `target_session_attrs` as written: `any`, `read-write` or `primary` (undefined: unset). The
   * worker writes, so `read-only`, `standby` and `prefer-standby` are refused.
   */
  readonly targetSessionAttrs: "any" | "read-write" | "primary" | undefined;
  /** The other query parameters (`sslmode`, `connect_timeout`, …), passed to postgres.js as-is. */
  readonly query: string;
}

/** Thrown for a URL the worker cannot use; the message never holds the URL or its secret. */
export class DatabaseUrlError extends Error {
  override name = "DatabaseUrlError";
}

const DEFAULT_PORT = 5432;
const SESSION_ATTRS = ["any", "read-write", "primary"] as const;
const STANDBY_ATTRS = ["read-only", "standby", "prefer-standby"];

function decode(part: string, what: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    throw new DatabaseUrlError(`the ${what} has a bad %-escape`);
  }
}

function parsePort(raw: string, what: string): number {
  if (!/^\d{1,5}$/.test(raw) || Number(raw) < 1 || Number(raw) > 65535) {
    throw new DatabaseUrlError(`${what} is not a port number from 1 to 65535`);
  }
  return Number(raw);
}

// One `host[:port]` of the authority's host list: a name, an IPv4 address, `[ipv6]`, or a
// %-escaped socket directory. An empty port takes the default.
function splitHostPort(spec: string): { host: string; port: string | undefined } {
  if (spec.startsWith("[")) {
    const end = spec.indexOf("]");
    if (end < 0) throw new DatabaseUrlError("an IPv6 host has no closing ]");
    const rest = spec.slice(end + 1);
    if (rest !== "" && !rest.startsWith(":")) {
      throw new DatabaseUrlError("an IPv6 host is followed by something other than :port");
    }
    return { host: spec.slice(1, end), port: rest ? rest.slice(1) : undefined };
  }
  // libpq ends a host at its first ":" (an IPv6 literal needs brackets): "h:5432:1" is host "h"
  // with the bad port "5432:1", never a host named "h:5432".
  const colon = spec.indexOf(":");
  return colon < 0
    ? { host: spec, port: undefined }
    : { host: spec.slice(0, colon), port: spec.slice(colon + 1) };
}

/**
 * Read a `DATABASE_URL`.
 *
 * @param raw `postgres://` or `postgresql://` URI (libpq's form).
 * @returns the target.
 * @throws {DatabaseUrlError} saying what is wrong, never quoting the URL: no host, a bad
 *   %-escape, a bad port, a socket mixed with TCP hosts, a standby-only `target_session_attrs`.
 * @example
 * parseDatabaseUrl("postgres://u:p@h1:5432,h2:5433/db?target_session_attrs=primary").hosts;
 * // ["h1", "h2"]
 */
export function parseDatabaseUrl(raw: string): DatabaseTarget {
  const scheme = /^postgres(ql)?:\/\//.exec(raw);
  if (!scheme) throw new DatabaseUrlError("it does not start with postgres:// or postgresql://");
  let rest = raw.slice(scheme[0].length);
  const hash = rest.indexOf("#");
  if (hash >= 0) rest = rest.slice(0, hash);
  const q = rest.indexOf("?");
  const queryText = q >= 0 ? rest.slice(q + 1) : "";
  if (q >= 0) rest = rest.slice(0, q);
  const slash = rest.indexOf("/");
  const authority = slash >= 0 ? rest.slice(0, slash) : rest;
  const path = slash >= 0 ? rest.slice(slash + 1) : "";
  // The password may hold an unescaped "@"; the host list cannot, so the last "@" ends userinfo.
  const at = authority.lastIndexOf("@");
  const userinfo = at >= 0 ? authority.slice(0, at) : undefined;
  const hostList = at >= 0 ? authority.slice(at + 1) : authority;

  let user: string | undefined;
  let password: string | undefined;
  if (userinfo !== undefined) {
    const colon = userinfo.indexOf(":");
    user = decode(colon >= 0 ? userinfo.slice(0, colon) : userinfo, "user name") || undefined;
    if (colon >= 0) password = decode(userinfo.slice(colon + 1), "password");
  }
  if (path.includes("/")) throw new DatabaseUrlError("the database name holds a /");
  let database = decode(path, "database name") || undefined;

  // libpq's query parameters that name the target; the others go to postgres.js unchanged.
  const params = new URLSearchParams();
  let hostParam: string | undefined;
  let portParam: string | undefined;
  let attrs: string | undefined;
  for (const pair of queryText.split("&")) {
    if (!pair) continue;
    const eq = pair.indexOf("=");
    const key = decode((eq >= 0 ? pair.slice(0, eq) : pair).replaceAll("+", " "), "query");
    const value = decode((eq >= 0 ? pair.slice(eq + 1) : "").replaceAll("+", " "), "query");
    if (key === "host") hostParam = value;
    else if (key === "port") portParam = value;
    else if (key === "user") user = value || user;
    else if (key === "password") password = value;
    else if (key === "dbname") database = value || database;
    else if (key === "target_session_attrs") attrs = value;
    else params.append(key, value);
  }

  // Each host of the list, decoded: a name or address, or a socket directory (starts with "/").
  const specs = (hostParam ?? hostList) === "" ? [] : (hostParam ?? hostList).split(",");
  const entries = specs.map((spec) => {
    if (hostParam !== undefined) return { host: spec, port: undefined as string | undefined };
    const { host, port } = splitHostPort(spec);
    return { host: decode(host, "host"), port };
  });
  if (entries.length === 0 || entries.some((e) => e.host === "")) {
    throw new DatabaseUrlError(
      "it names no host (give a host, a host list h1:5432,h2:5432, or a socket directory as " +
        "?host=/var/run/postgresql)",
    );
  }
  const portSpecs = portParam !== undefined ? portParam.split(",") : undefined;
  if (portSpecs && portSpecs.length !== 1 && portSpecs.length !== entries.length) {
    throw new DatabaseUrlError("the port list and the host list differ in length");
  }
  const ports = entries.map((e, i) => {
    const spec = portSpecs ? portSpecs[portSpecs.length === 1 ? 0 : i] : e.port;
    return spec === undefined || spec === ""
      ? DEFAULT_PORT
      : parsePort(spec, `the port of host ${i + 1}`);
  });
  const sockets = entries.filter((e) => e.host.startsWith("/"));
  if (sockets.length > 0 && entries.length > 1) {
    throw new DatabaseUrlError(
      "a socket directory cannot be mixed with other hosts (postgres.js opens one socket path)",
    );
  }
  for (const e of entries) {
    if (!e.host.startsWith("/") && /[\s/?#@]/.test(e.host)) {
      throw new DatabaseUrlError("a host name holds a space, /, ?, # or @");
    }
  }

  if (attrs !== undefined && !(SESSION_ATTRS as readonly string[]).includes(attrs)) {
    throw new DatabaseUrlError(
      STANDBY_ATTRS.includes(attrs)
        ? `target_session_attrs=${attrs} asks for a standby, and the worker writes (use ` +
          "read-write or primary)"
        : "target_session_attrs is not one of any, read-write, primary",
    );
  }
  return Object.freeze({
    hosts: sockets.length > 0 ? [] : entries.map((e) => e.host),
    ports,
    socketPath: sockets.length > 0
      ? `${sockets[0].host.replace(/\/+$/, "")}/.s.PGSQL.${ports[0]}`
      : undefined,
    user,
    password,
    database,
    targetSessionAttrs: attrs as DatabaseTarget["targetSessionAttrs"],
    query: params.toString(),
  });
}

/** What {@linkcode driverOptions} returns: postgres.js's URL argument and its options. */
export interface DriverTarget {
  /** A host-less URL carrying only the query parameters postgres.js reads itself (`sslmode` …). */
  readonly url: string;
  readonly options: {
    host: string[];
    port: number[];
    path: string | undefined;
    user: string | undefined;
    pass: string | undefined;
    database: string | undefined;
    target_session_attrs: "primary" | undefined;
  };
}

/**
 * The postgres.js arguments for a `DATABASE_URL`.
 *
 * A host list is always opened with `target_session_attrs=primary`, whatever the URL says:
 * postgres.js's `read-write` checks only `default_transaction_read_only`, which a PostgreSQL 15
 * hot standby reports off, so it would settle on a standby in recovery (its author's advice in
 * hapostgres/pg_auto_failover#970 is `primary`). `primary` refuses a server whose
 * `in_hot_standby` is on, or, on a server that does not report it, whose `pg_is_in_recovery()`
 * is true, and tries the next host. A single host gets no target check from the driver (there is
 * no other host to try); the lock sessions, the listener and `/readyz` check
 * `pg_is_in_recovery()` themselves, and every write to a standby fails with SQLSTATE 25006.
 *
 * @throws {DatabaseUrlError} as {@linkcode parseDatabaseUrl}.
 */
export function driverOptions(raw: string): DriverTarget {
  const t = parseDatabaseUrl(raw);
  return {
    url: `postgres://localhost/${t.query ? `?${t.query}` : ""}`,
    options: {
      host: t.socketPath ? ["localhost"] : [...t.hosts],
      port: [...t.ports],
      path: t.socketPath,
      user: t.user,
      pass: t.password,
      database: t.database,
      target_session_attrs: t.hosts.length > 1 ? "primary" : undefined,
    },
  };
}
