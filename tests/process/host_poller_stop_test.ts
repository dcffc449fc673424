/**
 * The host pollers under the faults their users meet, for real: each scenario of tests/_pollers.ts
 * (a lost claim answer, SIGTERM during a claim, a step that ignores SIGTERM, one that takes 2 s to
 * finish, one SIGTERM ends, an SEO stop against a slow worker), under dash and bash, stopped the
 * way systemd stops the units. Needs `setsid` (util-linux), curl and jq.
 */
import assert from "node:assert/strict";
import { dbTest } from "../_db.ts";
import { spawnWorker } from "../_worker.ts";
import {
  hostStage,
  lostClaimAnswer,
  seoSlowStop,
  SHELLS,
  stepAtStop,
  type StopReport,
  termDuringClaim,
} from "../_pollers.ts";

/** These tests need curl, jq (tests/_requires.ts: ignored where missing, outside CI). */
const REQUIRES = { requires: ["curl", "jq"] } as const;

function show(r: StopReport): string {
  return JSON.stringify({ ...r, lines: r.lines.slice(-30) }, null, 1);
}

/** Every report: no double effect, nothing stranded, exit 0 well inside TimeoutStopSec. */
function clean(r: StopReport): void {
  assert.equal(r.doubleEffects, 0, `double effects: ${show(r)}`);
  assert.equal(r.running, 0, `stranded Running: ${show(r)}`);
  assert.equal(r.stepOutlived, false, `a step outlived the poller: ${show(r)}`);
  assert.equal(r.exitCode, 0, `exit: ${show(r)}`);
  assert.ok(r.stopMs < r.timeoutStopS * 1000, `stop took ${r.stopMs} ms: ${show(r)}`);
}

for (const queue of ["auto-publish", "seo"] as const) {
  dbTest(
    `a lost claim answer (${queue}) is asked again with its key: every job runs once`,
    async (db) => {
      const stage = await hostStage(db.sql, (env) => spawnWorker(db, env));
      try {
        for (const shell of SHELLS) {
          const r = await lostClaimAnswer(stage, shell, queue);
          clean(r);
          assert.equal(r.completed, r.enqueued, show(r));
          assert.equal(r.extraAttempts, 0, show(r));
          assert.deepEqual(Object.values(r.effects), Array(r.enqueued).fill(1), show(r));
          assert.ok(r.lines.some((l) => /no answer from the worker/.test(l)), show(r));
        }
      } finally {
        await stage.close();
      }
    },
    REQUIRES,
  );

  dbTest(`SIGTERM during a claim (${queue}) finishes it and gives its jobs back`, async (db) => {
    const stage = await hostStage(db.sql, (env) => spawnWorker(db, env));
    try {
      for (const shell of SHELLS) {
        const r = await termDuringClaim(stage, shell, queue);
        clean(r);
        assert.equal(r.givenBack, r.enqueued, show(r));
        // Run again by the restarted poller, once, with the attempt of the stop not counted.
        assert.equal(r.completed, r.enqueued, show(r));
        assert.equal(r.extraAttempts, 0, show(r));
        // The stop's own lines reached stderr.
        assert.ok(r.lines.some((l) => /stopping/.test(l)), show(r));
        assert.ok(r.lines.some((l) => /: stopped$/.test(l)), show(r));
      }
    } finally {
      await stage.close();
    }
  }, REQUIRES);
}

dbTest(
  "a step that ignores SIGTERM is killed at the bound and its job Failed interrupted",
  async (db) => {
    const stage = await hostStage(db.sql, (env) => spawnWorker(db, env));
    try {
      for (const shell of SHELLS) {
        const r = await stepAtStop(stage, shell, "ignores");
        clean(r);
        assert.deepEqual([r.failed, r.completed, r.queued], [1, 0, 0], show(r));
        assert.match(
          Object.values(r.errors)[0] ?? "",
          /^interrupted \(the poller stopped/,
          show(r),
        );
        assert.deepEqual(r.effects, {}, show(r));
        // Killed at the step's bound (STOP_TIMEOUT_S 6 - GIVE_BACK_MAX_TIME_S 2 = 4 s), not before.
        assert.ok(r.stopMs >= 3500 && r.stopMs < 6500, `stop took ${r.stopMs} ms`);
      }
    } finally {
      await stage.close();
    }
  },
  REQUIRES,
);

dbTest(
  "a step that takes 2 s to finish after SIGTERM is waited for and completed once",
  async (db) => {
    const stage = await hostStage(db.sql, (env) => spawnWorker(db, env));
    try {
      for (const shell of SHELLS) {
        const r = await stepAtStop(stage, shell, "finishes");
        clean(r);
        assert.deepEqual([r.completed, r.failed, r.givenBack], [1, 0, 0], show(r));
        assert.deepEqual(Object.values(r.effects), [1], show(r));
        assert.deepEqual(Object.values(r.pings), [1], show(r));
        assert.ok(r.stopMs >= 1500, `stop took ${r.stopMs} ms: it did not wait for the step`);
      }
    } finally {
      await stage.close();
    }
  },
  REQUIRES,
);

dbTest("a step SIGTERM ends (its whole group) is given back and runs again once", async (db) => {
  const stage = await hostStage(db.sql, (env) => spawnWorker(db, env));
  try {
    for (const shell of SHELLS) {
      const r = await stepAtStop(stage, shell, "dies");
      clean(r);
      assert.equal(r.givenBack, 1, show(r));
      assert.deepEqual([r.completed, r.extraAttempts], [1, 0], show(r));
      assert.deepEqual(Object.values(r.effects), [1], show(r));
    }
  } finally {
    await stage.close();
  }
}, REQUIRES);

dbTest(
  "the SEO stop fits TimeoutStopSec against a slow worker: its batch given back in one request",
  async (db) => {
    const stage = await hostStage(db.sql, (env) => spawnWorker(db, env));
    try {
      for (const shell of SHELLS) {
        const r = await seoSlowStop(stage, shell);
        clean(r);
        assert.equal(r.givenBack, 5, show(r));
        assert.ok(r.stopMs < 6500, `stop took ${r.stopMs} ms, above STOP_TIMEOUT_S: ${show(r)}`);
        assert.deepEqual([r.completed, r.extraAttempts], [5, 0], show(r));
      }
    } finally {
      await stage.close();
    }
  },
  REQUIRES,
);
