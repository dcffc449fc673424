/**
 * settleByToken (lib/claim_token.ts): the control flow of a host-polled queue's token-fenced
 * settle, over a table this file makes in its own schema and statements written here, the way a
 * queue passes its own (ADR-022: no table name reaches lib/).
 */
import assert from "node:assert/strict";
import { dbTest } from "../_db.ts";
import type { Sql } from "../../lib/db.ts";
import type { JobEvent } from "../../lib/events.ts";
import {
  afterMiss,
  settleByToken,
  type SettleVerb,
  type TokenQueue,
  type TokenState,
} from "../../lib/claim_token.ts";

interface Row {
  id: string;
  status: string;
  attempt_count: number;
  error: string | null;
}

const TOKEN = "0b7f3c8e-6a51-4d2b-9c3e-5f1a2b3c4d5e";
const STALE = "9e8d7c6b-5a49-4837-a625-1403f2e1d0c9";

async function setUp(sql: Sql): Promise<{ id: string; events: JobEvent[]; ctx: Ctx }> {
  await sql`
    create table settle_jobs (
      id bigint generated always as identity primary key,
      status text not null,
      attempt_count int not null,
      error text,
      claim_token uuid
    )`;
  const [{ id }] = await sql<{ id: string }[]>`
    insert into settle_jobs (status, attempt_count, claim_token)
    values ('Running', 1, ${TOKEN}) returning id::text`;
  const events: JobEvent[] = [];
  return { id, events, ctx: { sql, events: { publish: (e) => void events.push(e) } } };
}

type Ctx = Parameters<typeof settleByToken>[0];

const queue: TokenQueue<Row> = {
  name: "settle_test",
  async reread(sql, id) {
    const [row] = await sql<(Row & TokenState)[]>`
      select id::text, status, attempt_count, error, claim_token::text from settle_jobs
      where id = ${id}`;
    return row;
  },
};

// The test queue's fail: its own UPDATE, fenced on Running and the token.
function fail(ctx: Ctx, id: string, token: string, verb: SettleVerb = "fail") {
  return settleByToken(ctx, queue, { verb, id, token }, async () => {
    const [row] = await ctx.sql<Row[]>`
      update settle_jobs set status = 'Failed', error = 'boom'
      where id = ${id} and status = 'Running' and claim_token = ${token}
      returning id::text, status, attempt_count, error`;
    return row;
  });
}

async function stored(sql: Sql, id: string) {
  const [row] =
    await sql`select status, error, claim_token::text from settle_jobs where id = ${id}`;
  return { ...row };
}

dbTest("settleByToken() with the claim's token settles the job and publishes once", async (db) => {
  const { id, events, ctx } = await setUp(db.sql);
  const outcome = await fail(ctx, id, TOKEN);
  assert.deepEqual(outcome, {
    outcome: "settled",
    job: { id, status: "Failed", attempt_count: 1, error: "boom" },
  });
  assert.deepEqual(await stored(db.sql, id), {
    status: "Failed",
    error: "boom",
    claim_token: TOKEN,
  });
  assert.deepEqual(events, [{
    queue: "settle_test",
    id,
    transition: "failed",
    status: "Failed",
    attempt: 1,
    error: "boom",
  }]);
});

dbTest(
  "settleByToken() with a stale token is lost: nothing changes, nothing is published",
  async (db) => {
    const { id, events, ctx } = await setUp(db.sql);
    const outcome = await fail(ctx, id, STALE);
    // The job is answered without its token.
    assert.deepEqual(outcome, {
      outcome: "lost",
      job: { id, status: "Running", attempt_count: 1, error: null },
    });
    assert.deepEqual(await stored(db.sql, id), {
      status: "Running",
      error: null,
      claim_token: TOKEN,
    });
    assert.deepEqual(events, []);
  },
);

dbTest(
  "settleByToken() on a settled job: repeated for its own token and verb, lost otherwise",
  async (db) => {
    const { id, events, ctx } = await setUp(db.sql);
    assert.equal((await fail(ctx, id, TOKEN)).outcome, "settled");
    events.length = 0;
    const again = await fail(ctx, id, TOKEN);
    assert.deepEqual(again, {
      outcome: "repeated",
      job: { id, status: "Failed", attempt_count: 1, error: "boom" },
    });
    // Settled by this token, but as a fail: a complete or a give-back with it is not the same.
    assert.equal((await fail(ctx, id, TOKEN, "complete")).outcome, "lost");
    assert.equal((await fail(ctx, id, TOKEN, "give-back")).outcome, "lost");
    assert.equal((await fail(ctx, id, STALE)).outcome, "lost");
    assert.deepEqual(events, []);
    assert.deepEqual(await stored(db.sql, id), {
      status: "Failed",
      error: "boom",
      claim_token: TOKEN,
    });
  },
);

dbTest("settleByToken() for an unknown id is absent", async (db) => {
  const { events, ctx } = await setUp(db.sql);
  assert.deepEqual(await fail(ctx, "999999", TOKEN), { outcome: "absent" });
  assert.deepEqual(events, []);
});

Deno.test("afterMiss() is repeated only for the same token and the verb's status", () => {
  const row = { id: "1", status: "Queued", claim_token: TOKEN };
  assert.deepEqual(afterMiss(row, TOKEN, "give-back"), {
    outcome: "repeated",
    job: { id: "1", status: "Queued" },
  });
  assert.equal(afterMiss(row, TOKEN, "complete").outcome, "lost");
  assert.equal(afterMiss({ ...row, claim_token: null }, TOKEN, "give-back").outcome, "lost");
  assert.deepEqual(afterMiss(undefined, TOKEN, "fail"), { outcome: "absent" });
});
