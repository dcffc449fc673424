/**
 * A new queue is a folder, a migration and one line of main.ts (queues/README.md, "Adding a
 * queue"): the example queue (examples/noop/) is added to a scratch copy of the repository by those
 * steps alone, what changed is counted against this checkout, and the scratch copy's worker runs a
 * job of the new queue end to end (claim, run, fenced completion), shows it in /metrics, and gives
 * nothing back at SIGTERM.
 *
 * @module
 */
import assert from "node:assert/strict";
import { dirname, join, relative } from "node:path";
import { createTestDb, waitFor } from "../_db.ts";
import { spawnWorker, TEST_TOKEN } from "../_worker.ts";

const ROOT = new URL("../../", import.meta.url).pathname;

/**
 * The repository's files: as git lists them (tracked and untracked, not ignored), or, in a copy
 * without git (no repository, or no git installed), every file but the local state (`.data/`,
 * `node_modules/`).
 */
async function repoFiles(): Promise<string[]> {
  let out: Deno.CommandOutput | null = null;
  try {
    out = await new Deno.Command("git", {
      args: ["ls-files", "--cached", "--others", "--exclude-standard"],
      cwd: ROOT,
      stdout: "piped",
      stderr: "null",
    }).output();
  } catch (e) {
    // No git installed: output() throws NotFound itself (the spawn is synchronous).
    if (!(e instanceof Deno.errors.NotFound)) throw e;
  }
  if (!out?.success) {
    return (await walk(ROOT)).filter((f) => !/^(\.git|\.data|node_modules)\//.test(f));
  }
  return new TextDecoder().decode(out.stdout).split("\n").filter((f) => f && exists(ROOT + f));
}

function exists(path: string): boolean {
  try {
    Deno.statSync(path);
    return true;
  } catch {
    return false;
  }
}

/** Every file under `dir`, relative to it. */
async function walk(dir: string, under = dir): Promise<string[]> {
  const found: string[] = [];
  for await (const entry of Deno.readDir(dir)) {
    const path = join(dir, entry.name);
    if (entry.isDirectory) found.push(...await walk(path, under));
    else if (entry.isFile) found.push(relative(under, path));
  }
  return found;
}

/** The lines of `after` that `before` lacks, and the lines `after` lost: a line count. */
function lineChanges(before: string, after: string): { added: string[]; removed: string[] } {
  const a = before.split("\n");
  const b = after.split("\n");
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start++;
  let endA = a.length;
  let endB = b.length;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) endA--, endB--;
  return { added: b.slice(start, endB), removed: a.slice(start, endA) };
}

Deno.test("a new queue is its folder, a migration and one line of main.ts, and runs", async () => {
  const scratch = await Deno.makeTempDir({ prefix: "textstack-new-queue-" });
  try {
    for (const file of await repoFiles()) {
      await Deno.mkdir(dirname(join(scratch, file)), { recursive: true });
      await Deno.copyFile(join(ROOT, file), join(scratch, file));
    }
    // The checkout's installed npm packages, shared.
    if (exists(join(ROOT, "node_modules"))) {
      await Deno.symlink(join(ROOT, "node_modules"), join(scratch, "node_modules"));
    }

    // 1. The folder.
    await Deno.mkdir(join(scratch, "queues/noop"));
    for (const file of ["mod.ts", "view.ts", "setup.ts", "table.sql"]) {
      await Deno.copyFile(join(ROOT, "examples/noop", file), join(scratch, "queues/noop", file));
    }
    // 2. The migration, with the next number.
    const numbers = (await walk(join(ROOT, "sql")))
      .map((f) => /^(\d+)_.*\.sql$/.exec(f)?.[1]).filter((n): n is string => !!n).map(Number);
    const next = String(Math.max(...numbers) + 1).padStart(3, "0");
    await Deno.copyFile(
      join(ROOT, "examples/noop/table.sql"),
      join(scratch, `sql/${next}_noop.sql`),
    );
    // 3. One line of main.ts: the queue list's last entry is followed by the new one.
    const main = await Deno.readTextFile(join(ROOT, "main.ts"));
    const last = [...main.matchAll(/^ {2}import\("\.\/queues\/[a-z_]+\/setup\.ts"\),$/gm)].at(-1);
    assert.ok(last, "main.ts has no queue list of setup imports");
    const at = last.index! + last[0].length;
    const edited = `${main.slice(0, at)}\n  import("./queues/noop/setup.ts"),${main.slice(at)}`;
    await Deno.writeTextFile(join(scratch, "main.ts"), edited);

    // What the new queue touched, counted against this checkout.
    const before = new Set(await repoFiles());
    const after = (await walk(scratch)).filter((f) => !f.startsWith("node_modules"));
    const added = after.filter((f) => !before.has(f)).sort();
    assert.deepEqual(added, [
      "queues/noop/mod.ts",
      "queues/noop/setup.ts",
      "queues/noop/table.sql",
      "queues/noop/view.ts",
      `sql/${next}_noop.sql`,
    ]);
    const changed: string[] = [];
    for (const file of before) {
      const a = await Deno.readFile(join(ROOT, file));
      const b = await Deno.readFile(join(scratch, file));
      if (a.length !== b.length || a.some((byte, i) => byte !== b[i])) changed.push(file);
    }
    assert.deepEqual(changed, ["main.ts"]);
    const lines = lineChanges(main, edited);
    assert.deepEqual(lines, { added: ['  import("./queues/noop/setup.ts"),'], removed: [] });

    // The scratch copy's worker runs the new queue.
    const db = await createTestDb("new_queue");
    try {
      const worker = spawnWorker(db, {}, [], join(scratch, "main.ts"));
      try {
        const base = await worker.baseUrl();
        await worker.waitForLog("consumer started", { queue: "noop" });
        await db.sql`insert into noop_jobs default values`;
        await waitFor("the new queue's job to complete", async () => {
          const [row] = await db.sql<{ status: string }[]>`select status from noop_jobs`;
          return row?.status === "Completed";
        }, 10_000);
        const metrics = await (await fetch(`${base}/metrics`, {
          headers: { authorization: `Bearer ${TEST_TOKEN}` },
        })).text();
        assert.match(metrics, /textstack_worker_lock_held\{queue="noop"\} 1/);
      } finally {
        worker.child.kill("SIGTERM");
      }
      assert.equal((await worker.exited).code, 0);
    } finally {
      await db.close();
    }
  } finally {
    await Deno.remove(scratch, { recursive: true });
  }
});
