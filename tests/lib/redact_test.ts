import assert from "node:assert/strict";
import {
  redact,
  REDACTED,
  redactError,
  registerSecretsFrom,
  SECRET_SETTINGS,
} from "../../lib/redact.ts";

// A seeded generator: the same cases on every run, many of them.
function rng(seed: number): () => number {
  return () => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed / 0x7fffffff;
  };
}
const B64TOKEN = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/";
const PASSWORD_CHARS = `${B64TOKEN}!#$%^&*()[]{}:;@?=,'"\\<>|`;
function pick(random: () => number, alphabet: string, min: number, max: number): string {
  const length = min + Math.floor(random() * (max - min + 1));
  return Array.from({ length }, () => alphabet[Math.floor(random() * alphabet.length)]).join("");
}

// How a secret can reach a log line, an error body or a page.
const CARRIERS: ((secret: string, env: Record<string, string>) => string)[] = [
  (s) => `request failed: ${s}`,
  (s) => JSON.stringify({ err: { message: `bad key ${s}` } }),
  (s) => `GET https://api.example.test/v1?key=${encodeURIComponent(s)}&x=1`,
  (s) => `Authorization: Bearer ${s}`,
  (_s, env) => `connect ECONNREFUSED ${env.DATABASE_URL}`,
  (_s, env) => JSON.stringify({ err: `Cannot use DATABASE_URL: ${env.DATABASE_URL}` }),
];

Deno.test("redact hides every secret setting's value in every carrier (400 generated values)", () => {
  const random = rng(20);
  for (let i = 0; i < 400; i++) {
    const password = pick(random, PASSWORD_CHARS, 6, 40);
    const env: Record<string, string> = {
      DATABASE_URL: `postgres://app:${password}@db${i}.internal:5432/textstack`,
    };
    for (const name of SECRET_SETTINGS) env[name] = pick(random, B64TOKEN, 16, 64);
    registerSecretsFrom(env);
    for (const name of [...SECRET_SETTINGS, "DATABASE_URL password"]) {
      const secret = name === "DATABASE_URL password" ? password : env[name];
      for (const carry of CARRIERS) {
        const out = redact(carry(secret, env));
        for (
          const form of [secret, encodeURIComponent(secret), JSON.stringify(secret).slice(1, -1)]
        ) {
          assert.ok(!out.includes(form), `${name} ${JSON.stringify(secret)} in ${out}`);
        }
      }
    }
  }
});

Deno.test("redact hides the password of a malformed or unregistered database URL, and keeps the rest", () => {
  const random = rng(7);
  for (let i = 0; i < 200; i++) {
    const password = pick(random, B64TOKEN, 4, 30);
    for (
      const url of [
        `postgres://app:${password}@db:5432/x`,
        `postgres://app:${password}%zz@db/x`, // bad %-escape
        `postgres://app:${password}@/x`, // no host
        `mysql://app:${password}@db/x`, // wrong scheme
        `postgres://app:${password}@h1:5432,h2:5433/x?target_session_attrs=read-write`,
      ]
    ) {
      const out = redact(`Cannot use ${url} now`);
      assert.ok(!out.includes(password), out);
      assert.match(out, /:\/\/app:\*\*\*@/);
      assert.match(out, /^Cannot use .* now$/);
    }
    assert.equal(
      redact(`host=db password=${password} dbname=x`),
      `host=db password=${REDACTED} dbname=x`,
    );
  }
  assert.equal(redact("no secret here: /healthz 200"), "no secret here: /healthz 200");
  assert.equal(
    redactError(new Error("connect to postgres://u:pw-secret@db:5432/x failed")),
    "connect to postgres://u:***@db:5432/x failed",
  );
});

Deno.test("the process logger writes every line redacted: a registered token and a URL password never reach stdout", async () => {
  const token = "log-test-token-0123456789abcdef";
  const script = `
    import { createLogger } from "${new URL("../../lib/log.ts", import.meta.url).href}";
    import { registerSecretsFrom } from "${new URL("../../lib/redact.ts", import.meta.url).href}";
    registerSecretsFrom({ INTERNAL_API_TOKEN: "${token}" });
    const log = createLogger("info");
    log.warn({ err: "connect postgres://app:pw-in-url-77@db:5432/x failed" }, "request failed");
    log.info({ note: "Authorization: Bearer ${token}" }, "runtime message");
    log.error({ err: new Error("token ${token} refused") }, "startup failed");
  `;
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["eval", "--ext=ts", script],
    cwd: new URL("../..", import.meta.url).pathname,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(out.stdout);
  assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
  assert.equal(text.trim().split("\n").length, 3, text);
  assert.ok(!text.includes(token), text);
  assert.ok(!text.includes("pw-in-url-77"), text);
  assert.match(text, /postgres:\/\/app:\*\*\*@db:5432/);
});
