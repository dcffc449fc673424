/**
 * Chapter assets on disk: `<storage>/editions/<edition id>/v<asset version>/<position>.html`, and
 * the resources the chapters use beside them in `…/v<asset version>/res/<name>`.
 * Exactly one version per edition should remain, the one `editions.asset_version` names; the
 * ingestion queue writes the new version after its transaction commits, then removes the rest.
 *
 * @module
 */
import { join } from "node:path";

/** A resource's path in a version folder: `res/` and one safe name (no `..`, no leading dot). */
const RESOURCE_PATH = /^res\/(?!\.)[A-Za-z0-9._-]+$/;

/**
 * Chapter files written at once. Each write is a round trip to the runtime's I/O threads; written
 * one after another, a two-chapter book waited for two of them.
 */
const WRITES_IN_FLIGHT = 8;

/** The directory holding every asset version of an edition. */
export function editionDir(storageDir: string, editionId: string): string {
  return join(storageDir, "editions", editionId);
}

/**
 * A resource as written: its path relative to the version folder (`res/<name>`), and a way to
 * get its bytes, so the repair can read one at a time from the database.
 */
export interface AssetResource {
  path: string;
  bytes: Uint8Array | (() => Promise<Uint8Array>);
}

/**
 * Write one asset version: a chapter per file, `1.html`, `2.html`, … in reading order, and the
 * resources the chapters use beside them (`res/…`), which the chapters link to relatively.
 *
 * Files are written into a temporary directory renamed into place, so a crash mid-write never
 * leaves a half-written version under its final name. With `inPlace` they are written straight
 * into the version's directory (one mkdir, no staging, no rename): for a version nothing else was
 * ever written under, a new edition's first. A crash then leaves it partial under its
 * final name, which is as good as absent: the database says it was never completed
 * (`editions.assets_version`), and the repair rewrites it with staging.
 *
 * @param chapters `{ html }` per chapter, in order.
 * @param resources the files the chapters use; each `path` must be `res/<name>` with only
 *   `[A-Za-z0-9._-]` in the name (sql/008_edition_fidelity.sql checks the same).
 * @param signal optional; checked between batches of {@linkcode WRITES_IN_FLIGHT} chapters and
 *   between resources, so a shutdown need not wait for a huge book.
 * @param options `inPlace`: see above (default false).
 * @returns the version's directory.
 * @throws RangeError when a resource path is not of that shape (nothing is written outside the
 *   version folder); the file-system error when a write fails; `signal.reason` when it aborts (the
 *   staging directory is then removed).
 */
export async function writeAssets(
  storageDir: string,
  editionId: string,
  version: number,
  chapters: ReadonlyArray<{ html: string }>,
  resources: ReadonlyArray<AssetResource>,
  signal?: AbortSignal,
  options: { inPlace?: boolean } = {},
): Promise<string> {
  const dir = editionDir(storageDir, editionId);
  const target = join(dir, `v${version}`);
  const staging = options.inPlace ? target : join(dir, `.v${version}-${crypto.randomUUID()}`);
  await Deno.mkdir(staging, { recursive: true });
  try {
    for (let from = 0; from < chapters.length; from += WRITES_IN_FLIGHT) {
      signal?.throwIfAborted();
      const batch = chapters.slice(from, from + WRITES_IN_FLIGHT);
      const written = await Promise.allSettled(
        batch.map((chapter, i) =>
          Deno.writeTextFile(join(staging, `${from + i + 1}.html`), chapter.html)
        ),
      );
      // Every write of the batch has settled, so the cleanup below races none of them.
      const failed = written.find((w) => w.status === "rejected");
      if (failed) throw failed.reason;
    }
    if (resources.length > 0) await Deno.mkdir(join(staging, "res"));
    for (const resource of resources) {
      signal?.throwIfAborted();
      if (!RESOURCE_PATH.test(resource.path)) {
        throw new RangeError(`Cannot write resource "${resource.path}": expected res/<name>`);
      }
      const bytes = typeof resource.bytes === "function" ? await resource.bytes() : resource.bytes;
      await Deno.writeFile(join(staging, resource.path), bytes);
    }
  } catch (err) {
    await Deno.remove(staging, { recursive: true }).catch(() => {});
    throw err;
  }
  if (options.inPlace) return target;
  await Deno.remove(target, { recursive: true }).catch((err) => {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
  });
  await Deno.rename(staging, target);
  return target;
}

/**
 * Delete every asset version of an edition except `keep` (also staging leftovers of a crash).
 *
 * @returns the names of the removed entries.
 */
export async function removeOtherAssetVersions(
  storageDir: string,
  editionId: string,
  keep: number,
): Promise<string[]> {
  const dir = editionDir(storageDir, editionId);
  const removed: string[] = [];
  for await (const entry of Deno.readDir(dir)) {
    if (entry.name === `v${keep}`) continue;
    await Deno.remove(join(dir, entry.name), { recursive: true });
    removed.push(entry.name);
  }
  return removed;
}

/** The asset version directories present for an edition, e.g. `["v2"]` (sorted). */
export async function listAssetVersions(storageDir: string, editionId: string): Promise<string[]> {
  const names: string[] = [];
  try {
    for await (const entry of Deno.readDir(editionDir(storageDir, editionId))) {
      names.push(entry.name);
    }
  } catch (err) {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
  }
  return names.sort();
}
