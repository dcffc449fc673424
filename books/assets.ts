/**
 * Chapter assets on disk: `<storage>/editions/<edition id>/v<asset version>/<position>.html`.
 * Exactly one version per edition should remain, the one `editions.asset_version` names; the
 * ingestion queue writes the new version after its transaction commits, then removes the rest.
 *
 * @module
 */
import { join } from "node:path";

/** The directory holding every asset version of an edition. */
export function editionDir(storageDir: string, editionId: string): string {
  return join(storageDir, "editions", editionId);
}

/**
 * Write one asset version: a chapter per file, `1.html`, `2.html`, … in reading order.
 *
 * Files are written into a temporary directory renamed into place, so a crash mid-write never
 * leaves a half-written version under its final name.
 *
 * @param chapters `{ html }` per chapter, in order.
 * @param signal optional; checked between files, so a shutdown need not wait for a huge book.
 * @returns the version's directory.
 * @throws the file-system error when a write fails; `signal.reason` when it aborts (the staging
 *   directory is then removed).
 */
export async function writeAssets(
  storageDir: string,
  editionId: string,
  version: number,
  chapters: ReadonlyArray<{ html: string }>,
  signal?: AbortSignal,
): Promise<string> {
  const dir = editionDir(storageDir, editionId);
  const target = join(dir, `v${version}`);
  const staging = join(dir, `.v${version}-${crypto.randomUUID()}`);
  await Deno.mkdir(staging, { recursive: true });
  try {
    for (const [i, chapter] of chapters.entries()) {
      signal?.throwIfAborted();
      await Deno.writeTextFile(join(staging, `${i + 1}.html`), chapter.html);
    }
  } catch (err) {
    await Deno.remove(staging, { recursive: true }).catch(() => {});
    throw err;
  }
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
