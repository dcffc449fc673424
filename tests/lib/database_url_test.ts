/**
 * `DATABASE_URL` read as libpq reads a URI (lib/database_url.ts): every form postgres.js can be
 * given (a host list, a local socket, IPv6, %-escaped user info) is accepted and reaches the
 * server; a URL the worker cannot use is refused with a message that never holds its password.
 */
import assert from "node:assert/strict";
import { ConfigError, parseConfig } from "../../lib/config.ts";
import { DatabaseUrlError, driverOptions, parseDatabaseUrl } from "../../lib/database_url.ts";
import { openClient } from "../../lib/db.ts";
import { testUrl } from "../_db.ts";
import { freePort } from "../_fs.ts";

// Random text over characters that need escaping in user info: every one must survive.
function randomText(n: number): string {
  const alphabet = "abcXYZ019:@/?#%&=+ ,;[]!$'()*~-._é€";
  return Array.from({ length: n }, () => alphabet[Math.floor(Math.random() * alphabet.length)])
    .join("");
}
const randomHost = () =>
  [
    () => `db${Math.floor(Math.random() * 100)}.internal`,
    () => `10.0.${Math.floor(Math.random() * 255)}.${Math.floor(Math.random() * 255)}`,
    () => "[::1]",
    () => "[fe80::1:2]",
  ][Math.floor(Math.random() * 4)]();

Deno.test("parseDatabaseUrl(): host lists with ports, user info and the database survive any escaping", () => {
  for (let i = 0; i < 300; i++) {
    const user = randomText(1 + Math.floor(Math.random() * 8));
    const password = randomText(Math.floor(Math.random() * 12));
    // A database name cannot hold "/"; "d" keeps it non-empty once they are taken out.
    const database = `d${randomText(Math.floor(Math.random() * 6)).replaceAll("/", "")}`;
    const n = 1 + Math.floor(Math.random() * 3);
    const hosts = Array.from({ length: n }, randomHost);
    const ports = hosts.map(
      () => (Math.random() < 0.3 ? undefined : 1 + Math.floor(Math.random() * 65535)),
    );
    const attrs = ["", "read-write", "primary", "any"][Math.floor(Math.random() * 4)];
    const raw = `postgres${Math.random() < 0.5 ? "ql" : ""}://${encodeURIComponent(user)}:${
      encodeURIComponent(password)
    }@${hosts.map((h, j) => ports[j] === undefined ? h : `${h}:${ports[j]}`).join(",")}/${
      encodeURIComponent(database)
    }?sslmode=disable${attrs ? `&target_session_attrs=${attrs}` : ""}`;
    const t = parseDatabaseUrl(raw);
    assert.deepEqual(t.hosts, hosts.map((h) => h.replace(/^\[|\]$/g, "")), raw);
    assert.deepEqual(t.ports, ports.map((p) => p ?? 5432), raw);
    assert.equal(t.user, user);
    assert.equal(t.password, password);
    assert.equal(t.database, database);
    assert.equal(t.socketPath, undefined);
    assert.equal(t.targetSessionAttrs, attrs || undefined);
    assert.equal(t.query, "sslmode=disable");
    // A host list is always opened with the primary check; one host gets none from the driver.
    assert.equal(driverOptions(raw).options.target_session_attrs, n > 1 ? "primary" : undefined);
    // And parseConfig takes it as it is.
    assert.equal(parseConfig({ DATABASE_URL: raw }).databaseUrl, raw);
  }
});

// User info as it is often pasted, unescaped: the first ":" ends the user name and the last "@"
// the user info, so a password may hold both.
Deno.test("parseDatabaseUrl(): an unescaped password with : and @ in it is the password", () => {
  const alphabet = "abcXYZ019:@!$&'()*+,;=~-._";
  const pick = (chars: string, n: number) =>
    Array.from({ length: n }, () => chars[Math.floor(Math.random() * chars.length)]).join("");
  for (let i = 0; i < 300; i++) {
    const user = pick("abcXYZ019-._~", 1 + Math.floor(Math.random() * 8));
    const password = pick(alphabet, 1 + Math.floor(Math.random() * 12));
    const host = randomHost();
    const raw = `postgres://${user}:${password}@${host}:5433/app`;
    const t = parseDatabaseUrl(raw);
    assert.equal(t.user, user, raw);
    assert.equal(t.password, password, raw);
    assert.deepEqual([t.hosts, t.ports, t.database], [
      [host.replace(/^\[|\]$/g, "")],
      [5433],
      "app",
    ], raw);
  }
});

Deno.test("parseDatabaseUrl(): a local socket directory, as ?host= or %-escaped as the host", () => {
  for (const dir of ["/var/run/postgresql", "/tmp", "/run/pg sockets/x"]) {
    for (const port of [undefined, 5432, 6543]) {
      const file = `${dir}/.s.PGSQL.${port ?? 5432}`;
      const forms = [
        `postgres:///db?host=${encodeURIComponent(dir)}${port ? `&port=${port}` : ""}`,
        `postgres://u@${encodeURIComponent(dir)}${port ? `:${port}` : ""}/db`,
        `postgresql://u:pw@/db?host=${dir.replaceAll(" ", "%20")}${port ? `&port=${port}` : ""}`,
      ];
      for (const raw of forms) {
        const t = parseDatabaseUrl(raw);
        assert.equal(t.socketPath, file, raw);
        assert.deepEqual(t.hosts, [], raw);
        assert.equal(t.database, "db");
        assert.equal(parseConfig({ DATABASE_URL: raw }).databaseUrl, raw);
      }
    }
  }
});

Deno.test("parseConfig(): a DATABASE_URL the worker cannot use is refused, naming the setting and never its password", () => {
  const secret = "s3cr3t-Pa55";
  const bad = [
    `mysql://u:${secret}@h/db`,
    `postgres://u:${secret}@/db`,
    `postgres://u:${secret}@h:99999/db`,
    `postgres://u:${secret}@h:0/db`,
    `postgres://u:${secret}@h:12ab/db`,
    `postgres://u:${secret}%zz@h/db`,
    `postgres://u%zz:${secret}@h/db`,
    `postgres://u:${secret}@h1:5432,/db`,
    `postgres://u:${secret}@h1,%2Ftmp/db`,
    `postgres://u:${secret}@[::1/db`,
    `postgres://u:${secret}@h/db?target_session_attrs=standby`,
    `postgres://u:${secret}@h/db?target_session_attrs=read-only`,
    `postgres://u:${secret}@h/db?target_session_attrs=prefer-standby`,
    `postgres://u:${secret}@h/db?target_session_attrs=whatever`,
    `postgres://u:${secret}@h1,h2/db?port=1,2,3`,
    `postgres://u:${secret}@h/db/extra`,
  ];
  for (const raw of bad) {
    assert.throws(() => parseDatabaseUrl(raw), DatabaseUrlError, raw);
    assert.throws(() => parseConfig({ DATABASE_URL: raw }), (err: unknown) => {
      assert.ok(err instanceof ConfigError, raw);
      assert.match(err.message, /^Cannot parse DATABASE_URL: /);
      assert.ok(!err.message.includes(secret), `${err.message} holds the password`);
      assert.ok(!err.message.includes(raw), `${err.message} quotes the URL`);
      return true;
    });
  }
});

Deno.test("parseDatabaseUrl(): a host followed by more than one :port is refused, whichever host of the list it is", () => {
  // libpq reads a host up to its first ":" (an IPv6 literal needs brackets), so "h:5432:1" is a
  // bad port, never a host named "h:5432" that the worker would look up in DNS forever.
  for (let i = 0; i < 50; i++) {
    const hosts = Array.from({ length: 1 + Math.floor(Math.random() * 3) }, randomHost);
    const bad = Math.floor(Math.random() * hosts.length);
    const extra = Array.from(
      { length: 1 + Math.floor(Math.random() * 2) },
      () => `:${1 + Math.floor(Math.random() * 65535)}`,
    ).join("");
    const list = hosts.map((h, j) => j === bad ? `${h}:5432${extra}` : h).join(",");
    const raw = `postgres://u:pw@${list}/db`;
    assert.throws(() => parseDatabaseUrl(raw), (err: unknown) => {
      assert.ok(err instanceof DatabaseUrlError, raw);
      assert.match(err.message, new RegExp(`host ${bad + 1}\\b`), `${raw}: ${err.message}`);
      return true;
    }, raw);
  }
});

Deno.test("openClient(): a host list whose first host is down, and a local socket URL, reach the server", async () => {
  const url = new URL(testUrl());
  const dead = freePort();
  const user = encodeURIComponent(decodeURIComponent(url.username));
  const auth = url.password ? `${user}:${url.password}` : user;
  const db = url.pathname.slice(1);
  const urls = [
    `postgres://${auth}@127.0.0.1:${dead},${url.hostname}:${
      url.port || 5432
    }/${db}?target_session_attrs=read-write`,
    `postgres://${auth}@127.0.0.1:${dead},${url.hostname}:${
      url.port || 5432
    }/${db}?target_session_attrs=primary`,
  ];
  // Debian's server keeps its socket in /var/run/postgresql (an upstream build's default is /tmp).
  const socketPort = url.port || "5432";
  const isSocket = (dir: string) => {
    try {
      return Deno.statSync(`${dir}/.s.PGSQL.${socketPort}`).isSocket === true;
    } catch {
      return false; // no local server socket there
    }
  };
  const socketDir = ["/var/run/postgresql", "/tmp"].find(isSocket) ?? "/var/run/postgresql";
  if (isSocket(socketDir)) {
    urls.push(`postgres:///${db}?host=${socketDir}&port=${socketPort}&user=${user}`);
    urls.push(`postgres://${auth}@${encodeURIComponent(socketDir)}:${socketPort}/${db}`);
  } else if (Deno.env.get("CI") === "true" && socketPort === "5432") {
    // The machine's server has a socket in CI; the embedded test server listens on TCP only
    // (lib/embedded.ts: no unix_socket_directories), so its run leaves the socket forms out.
    throw new Error(
      `CI: no PostgreSQL socket for port ${socketPort} for the local-socket URL forms`,
    );
  } else {
    console.warn(`skipping the local-socket forms: no PostgreSQL socket at ${socketDir}`);
  }
  for (const raw of urls) {
    const sql = openClient(raw, { max: 1, connect_timeout: 5, onnotice: () => {} });
    try {
      const [row] = await sql<{ db: string; socket: boolean }[]>`
        select current_database() as db, inet_server_addr() is null as socket`;
      assert.equal(row.db, db, raw);
      assert.equal(row.socket, raw.includes("host=") || raw.includes("%2F"), raw);
    } finally {
      await sql.end({ timeout: 1 });
    }
  }
});
