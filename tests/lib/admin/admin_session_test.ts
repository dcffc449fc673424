import assert from "node:assert/strict";
import { SessionStore } from "../../../lib/admin/session.ts";

Deno.test("SessionStore ends a session on revoke() and at its expiry, and holds at most max", () => {
  let now = 1_000;
  const sessions = new SessionStore(60_000, 3, () => now);
  const a = sessions.create();
  assert.match(a, /^[0-9a-f]{64}$/);
  assert.ok(sessions.valid(a));
  assert.ok(!sessions.valid(undefined));
  assert.ok(!sessions.valid("0".repeat(64)));
  sessions.revoke(a);
  assert.ok(!sessions.valid(a));

  const b = sessions.create();
  now += 59_999;
  assert.ok(sessions.valid(b));
  now += 1;
  assert.ok(!sessions.valid(b), "a session ends at its expiry");

  const [c, d, e] = [sessions.create(), sessions.create(), sessions.create()];
  assert.equal(sessions.size, 3);
  const f = sessions.create();
  assert.equal(sessions.size, 3);
  assert.ok(!sessions.valid(c), "the oldest session makes room");
  assert.ok([d, e, f].every((id) => sessions.valid(id)));
});
