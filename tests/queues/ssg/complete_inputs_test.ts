/**
 * A site build from complete inputs, on real Postgres and real directories: a rebuild refuses to
 * go live while a published edition's assets are not written (the previous build stays live, the
 * job is `Failed` naming the editions), and the asset write that completes them — the ingestion's
 * repair — queues the one rebuild it needs, joining a `Queued` Full rebuild, never from a failed
 * rebuild or a failed repair.
 *
 * @module
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import * as ssg from "../../../queues/ssg/mod.ts";
import * as ssgJobs from "../../../queues/ssg/jobs.ts";
import { repairAssets } from "../../../queues/ingestion/_assets.ts";
import { liveBuild } from "../../../site/builds.ts";
import { dbTest, type TestDb } from "../../_db.ts";
import { insertEdition, ssgContext, ssgJob } from "../../_ssg.ts";
import { ingestionContext } from "../../_ingestion.ts";

const IMAGE = '<p>Look:</p><img src="res/map.png" alt="map">';
// A real 1×1 PNG: the render checks an image's bytes.
const PNG = Uint8Array.from(
  atob(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",
  ),
  (c) => c.charCodeAt(0),
);

async function setup(db: TestDb) {
  const ctx = await ssgContext(db);
  const ingest = await ingestionContext(db, { storageDir: ctx.storageDir });
  const rebuild = async () => {
    const { job } = await ssgJobs.enqueue(ctx.sql);
    const claimed = (await ssg.claim(ctx))!;
    assert.equal(claimed.id, job.id);
    await ssg.run(ctx, claimed, new AbortController().signal);
    return await ssgJob(db, job.id);
  };
  return { ctx, ingest, rebuild };
}

// A published edition whose saved asset version (2) is not on disk yet: its image is in
// `resources` (the database holds the truth), the folder v2 was never written.
async function lagging(db: TestDb, storageDir: string, title: string, published = true) {
  const id = await insertEdition(db, storageDir, {
    title,
    chapters: [{ title: "One", html: IMAGE }],
    published,
  });
  await db.sql`update editions set asset_version = 2, assets_version = 1 where id = ${id}`;
  await db.sql`
    insert into resources (edition_id, path, media_type, bytes)
    values (${id}, 'res/map.png', 'image/png', ${PNG})`;
  return id;
}

const queued = async (db: TestDb) =>
  (await db.sql<{ id: string }[]>`
    select id from ssg_rebuild_jobs where status = 'Queued' order by id`).map((r) => r.id);

dbTest(
  "a rebuild with an edition whose assets are missing keeps the previous build live and ends Failed naming the editions",
  async (db) => {
    const { ctx, rebuild } = await setup(db);
    await insertEdition(db, ctx.storageDir, {
      title: "Complete",
      chapters: [{ title: "One", html: IMAGE }],
      assets: {},
    });
    assert.equal((await rebuild()).status, "Completed");
    const before = await liveBuild(ctx.siteDir);
    const a = await lagging(db, ctx.storageDir, "Lagging A");
    const b = await lagging(db, ctx.storageDir, "Lagging B");
    const job = await rebuild();
    assert.equal(job.status, "Failed");
    assert.ok(job.error?.startsWith(ssg.MISSING_ASSETS), job.error ?? "");
    assert.match(job.error ?? "", new RegExp(`editions (${a}|${b}) \\(v2 saved, v1 written\\)`));
    assert.ok(job.error?.includes(a) && job.error.includes(b), job.error ?? "");
    assert.equal(await liveBuild(ctx.siteDir), before, "the previous build stays live");
    assert.deepEqual(await queued(db), [], "a failed rebuild queues nothing");
  },
);

dbTest(
  "a completed asset repair of a published edition queues one rebuild, which goes live with the image",
  async (db) => {
    const { ctx, ingest, rebuild } = await setup(db);
    const id = await lagging(db, ctx.storageDir, "Lagging");
    assert.equal((await rebuild()).status, "Failed");
    assert.deepEqual(await queued(db), []);
    assert.equal(await repairAssets(ingest, new AbortController().signal), 1);
    const after = await queued(db);
    assert.equal(after.length, 1, "one rebuild for the completed repair");
    // Nothing left to repair: no further rebuild, however often the repair runs.
    for (let i = 0; i < 3; i++) {
      assert.equal(await repairAssets(ingest, new AbortController().signal), 0);
    }
    assert.deepEqual(await queued(db), after);
    const claimed = (await ssg.claim(ctx))!;
    await ssg.run(ctx, claimed, new AbortController().signal);
    assert.equal((await ssgJob(db, claimed.id)).status, "Completed");
    const page = await Deno.readTextFile(join(ctx.siteDir, "editions", id, "1.html"));
    assert.match(page, /<img[^>]*src="res\/map.png"/, page);
    const image = join(ctx.siteDir, "editions", id, "res", "map.png");
    assert.deepEqual(await Deno.readFile(image), PNG);
  },
);

dbTest(
  "repairs join a Queued Full rebuild, and an unpublished edition's repair queues none",
  async (db) => {
    const { ctx, ingest } = await setup(db);
    const { job } = await ssgJobs.enqueue(ctx.sql);
    await lagging(db, ctx.storageDir, "One");
    await lagging(db, ctx.storageDir, "Two");
    assert.equal(await repairAssets(ingest, new AbortController().signal), 2);
    assert.deepEqual(await queued(db), [job.id]);
    await db.sql`delete from ssg_rebuild_jobs`;
    await lagging(db, ctx.storageDir, "Draft", false);
    assert.equal(await repairAssets(ingest, new AbortController().signal), 1);
    assert.deepEqual(await queued(db), []);
  },
);

dbTest(
  "a repair that fails queues no rebuild: the failing rebuild is never queued again by itself",
  async (db) => {
    const { ctx, ingest, rebuild } = await setup(db);
    const id = await lagging(db, ctx.storageDir, "Lagging");
    assert.equal((await rebuild()).status, "Failed");
    // The edition's folder cannot be written: a file where its directory must go.
    await Deno.remove(join(ctx.storageDir, "editions", id), { recursive: true });
    await Deno.writeTextFile(join(ctx.storageDir, "editions", id), "not a directory");
    assert.equal(await repairAssets(ingest, new AbortController().signal), 0);
    await db.sql`update editions set assets_repair_after = null where id = ${id}`;
    assert.equal(await repairAssets(ingest, new AbortController().signal), 0);
    assert.deepEqual(await queued(db), []);
    const [{ count }] = await db.sql<{ count: number }[]>`
      select count(*)::int from ssg_rebuild_jobs`;
    assert.equal(count, 1, "only the one rebuild that failed");
  },
);

dbTest(
  "with several editions lacking assets, only the repair that completes the last one queues the rebuild",
  async (db) => {
    const { ctx, ingest, rebuild } = await setup(db);
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push(await lagging(db, ctx.storageDir, `Lagging ${i}`));
    assert.equal((await rebuild()).status, "Failed");
    // One at a time, as wakes with a small budget would: no rebuild while others still lack.
    for (const [i, id] of ids.entries()) {
      await db.sql`
        update editions set assets_repair_after = now() + interval '1 hour'
        where id <> ${id} and assets_version <> asset_version`;
      await db.sql`update editions set assets_repair_after = null where id = ${id}`;
      assert.equal(await repairAssets(ingest, new AbortController().signal), 1);
      assert.equal((await queued(db)).length, i === ids.length - 1 ? 1 : 0, `after repair ${i}`);
    }
    const claimed = (await ssg.claim(ctx))!;
    await ssg.run(ctx, claimed, new AbortController().signal);
    assert.equal((await ssgJob(db, claimed.id)).status, "Completed");
  },
);
