/**
 * A small HTTP-aware TCP proxy in front of the worker, for the host pollers' tests and the chaos
 * matrix: it reads each connection's request line (curl sends one request per connection), lets
 * the request through, and by rule either holds the answer back for a while (a worker that
 * answers slowly) or loses it (the request is served and commits; the client's connection is
 * then closed before a byte of the answer reaches it: curl reports "Empty reply from server").
 *
 * @module
 */

/** What happens to the answers of requests whose `METHOD /path` line matches. */
export interface HttpRule {
  match: RegExp;
  /** Hold the answer this long (ms) after the worker sent it. */
  delayMs?: number;
  /** Lose this many answers (counted down), then let them through. */
  lose?: number;
}

/** A running proxy. */
export interface HttpProxy {
  /** `http://127.0.0.1:<port>`: the worker through the proxy. */
  url: string;
  /** Add a rule; the first matching rule applies. */
  rule(rule: HttpRule): void;
  /** Drop every rule. */
  clear(): void;
  /** Request lines seen so far, `METHOD /path`. */
  readonly requests: string[];
  /** Answers lost so far. */
  readonly lost: number;
  close(): Promise<void>;
}

/**
 * Start a proxy to the worker at `upstream` (`http://127.0.0.1:<port>`).
 *
 * @example
 * const proxy = startHttpProxy(url);
 * proxy.rule({ match: /^POST \/internal\/seo\/jobs\/claim/, lose: 1 });
 */
export function startHttpProxy(upstream: string): HttpProxy {
  const target = new URL(upstream);
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const rules: HttpRule[] = [];
  const requests: string[] = [];
  const conns = new Set<Deno.Conn>();
  let lost = 0;

  const closeQuietly = (c: Deno.Conn) => {
    conns.delete(c);
    try {
      c.close();
    } catch { /* already closed */ }
  };

  async function serve(client: Deno.Conn): Promise<void> {
    conns.add(client);
    const buf = new Uint8Array(65536);
    let head = new Uint8Array(0);
    // Read until the request line is complete.
    while (!new TextDecoder().decode(head).includes("\r\n")) {
      const n = await client.read(buf).catch(() => null);
      if (n === null) return closeQuietly(client);
      const joined = new Uint8Array(head.length + n);
      joined.set(head);
      joined.set(buf.subarray(0, n), head.length);
      head = joined;
    }
    const [method, path] = new TextDecoder().decode(head).split("\r\n")[0].split(" ");
    const line = `${method} ${path}`;
    requests.push(line);
    const rule = rules.find((r) => r.match.test(line));
    const lose = rule?.lose !== undefined && rule.lose > 0;
    if (lose) rule!.lose!--;
    let server: Deno.Conn;
    try {
      server = await Deno.connect({ hostname: target.hostname, port: Number(target.port) });
    } catch {
      return closeQuietly(client);
    }
    conns.add(server);
    await writeAll(server, head).catch(() => {});
    (async () => {
      for (;;) {
        const n = await client.read(buf).catch(() => null);
        if (n === null) break;
        await writeAll(server, buf.slice(0, n)).catch(() => {});
      }
    })();
    const back = new Uint8Array(65536);
    let first = true;
    for (;;) {
      const n = await server.read(back).catch(() => null);
      if (n === null) break;
      if (first && lose) {
        // The worker answered (the request was served): lose that answer.
        lost++;
        break;
      }
      if (first && rule?.delayMs) await new Promise((r) => setTimeout(r, rule.delayMs));
      first = false;
      await writeAll(client, back.slice(0, n)).catch(() => {});
    }
    closeQuietly(server);
    closeQuietly(client);
  }

  (async () => {
    for await (const client of listener) serve(client).catch(() => closeQuietly(client));
  })().catch(() => {});

  return {
    url: `http://127.0.0.1:${(listener.addr as Deno.NetAddr).port}`,
    rule: (r) => void rules.push({ ...r }),
    clear: () => void rules.splice(0),
    requests,
    get lost() {
      return lost;
    },
    async close() {
      listener.close();
      for (const c of [...conns]) closeQuietly(c);
      await Promise.resolve();
    },
  };
}

async function writeAll(conn: Deno.Conn, data: Uint8Array): Promise<void> {
  let at = 0;
  while (at < data.length) at += await conn.write(data.subarray(at));
}
