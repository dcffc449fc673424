import assert from "node:assert/strict";
import { Hono } from "hono";
import { ConfigError, parseConfig } from "../../../lib/config.ts";
import { bearerGuard } from "../../../lib/http/bearer.ts";

// A seeded generator: the same tokens on every run.
function rng(seed: number): () => number {
  return () => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed / 0x7fffffff;
  };
}
const B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/";
// Every printable ASCII character a header value can carry, and the b64token ones often.
const PRINTABLE = Array.from({ length: 94 }, (_, i) => String.fromCharCode(0x21 + i)).join("");

function token(random: () => number): string {
  const length = 16 + Math.floor(random() * 40);
  const mostlyB64 = random() < 0.5;
  let out = "";
  for (let i = 0; i < length; i++) {
    const alphabet = mostlyB64 && random() < 0.97 ? B64 : PRINTABLE;
    out += alphabet[Math.floor(random() * alphabet.length)];
  }
  // Padding, at the end or (malformed) in the middle.
  const r = random();
  if (r < 0.2) out += "=".repeat(1 + Math.floor(random() * 2));
  else if (r < 0.3) out = out.slice(0, 8) + "=" + out.slice(8);
  return out;
}

function configAccepts(value: string, name: string): boolean {
  try {
    parseConfig({ [name]: value });
    return true;
  } catch (err) {
    if (err instanceof ConfigError) return false;
    throw err;
  }
}

async function bearerAccepts(value: string): Promise<boolean> {
  const app = new Hono();
  app.use("/*", bearerGuard(value, "INTERNAL_API_TOKEN", "textstack-internal"));
  app.get("/x", (c) => c.text("ok"));
  const res = await app.request("/x", { headers: { authorization: `Bearer ${value}` } });
  return res.status === 200;
}

Deno.test("a token setting is accepted by the configuration exactly when the bearer check accepts it (600 generated tokens)", async () => {
  const random = rng(6750);
  const seen = { accepted: 0, refused: 0 };
  for (let i = 0; i < 600; i++) {
    const value = token(random);
    const bearer = await bearerAccepts(value);
    for (const name of ["INTERNAL_API_TOKEN", "METRICS_TOKEN"]) {
      assert.equal(configAccepts(value, name), bearer, `${name}=${JSON.stringify(value)}`);
    }
    seen[bearer ? "accepted" : "refused"]++;
  }
  // Both sides of the property were exercised.
  assert.ok(seen.accepted > 100 && seen.refused > 100, JSON.stringify(seen));
});
