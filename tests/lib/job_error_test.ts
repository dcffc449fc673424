import assert from "node:assert/strict";
import { jobError, relativeToStorage } from "../../lib/job_error.ts";
import { dbTest } from "../_db.ts";

Deno.test("relativeToStorage leaves no absolute STORAGE_DIR in any message (generated paths, resolved and real roots)", async () => {
  const real = await Deno.makeTempDir({ prefix: "textstack-storage-" });
  const link = `${real}-link`;
  await Deno.symlink(real, link);
  try {
    // A root given through a link is known by both its names; one given directly, by its own.
    const cases: [string, string[]][] = [
      [real, [real]],
      [`${real}/./`, [real]],
      [link, [real, link]],
      [`${link}/`, [real, link]],
    ];
    for (const [root, names] of cases) {
      for (const rel of ["a.epub", "books/x y/b.txt", "user-books/7/ch-1.html", ""]) {
        for (const shown of names) {
          const message = `ENOENT: open '${shown}${rel ? `/${rel}` : ""}' (os error 2)`;
          const out = relativeToStorage(root, message);
          assert.ok(!out.includes(real), `${root}: ${out}`);
          assert.ok(out.includes(rel ? `'${rel}'` : "'.'"), out);
        }
      }
    }
    assert.equal(
      jobError(`fetch postgres://u:pw-secret-1@db/x failed in ${real}/a.txt`, real),
      "fetch postgres://u:***@db/x failed in a.txt",
    );
  } finally {
    await Deno.remove(link);
    await Deno.remove(real, { recursive: true });
  }
});

dbTest(
  "jobError shows a NUL as U+FFFD, so the reason it gives is one PostgreSQL's text can store",
  async (db) => {
    const error = jobError('Cannot read EPUB "a.epub": "ch\0apter.xhtml" is missing\0');
    assert.equal(error, 'Cannot read EPUB "a.epub": "ch\uFFFDapter.xhtml" is missing\uFFFD');
    const [row] = await db.sql<{ error: string }[]>`select ${error}::text as error`;
    assert.equal(row.error, error);
  },
);
