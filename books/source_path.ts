/**
 * Source paths: a job names its file relative to `STORAGE_DIR`, and nothing may lead outside it,
 * lexically (`../`) or through a symlink.
 *
 * @module
 */
import { isAbsolute, relative, resolve, sep } from "node:path";

function outside(rel: string): boolean {
  return rel === "" || rel === ".." || rel.startsWith(`..${sep}`) || isAbsolute(rel);
}

/**
 * Resolve a source path against the storage root, refusing anything outside it.
 *
 * @param storageDir the storage root.
 * @param sourcePath a path relative to it (absolute paths must lie inside it).
 * @returns the normalised path relative to `storageDir`, e.g. `books/moby.epub`.
 * @throws RangeError when the path is empty, holds a NUL, or resolves outside `storageDir`.
 */
export function resolveSourcePath(storageDir: string, sourcePath: string): string {
  const root = resolve(storageDir);
  const rel = relative(root, resolve(root, sourcePath));
  if (sourcePath.includes("\0") || outside(rel)) {
    throw new RangeError(
      `Cannot use source_path "${sourcePath}": it must name a file inside STORAGE_DIR`,
    );
  }
  return rel;
}

/**
 * Resolve a source path to the file to read, refusing one that leaves the storage root either
 * lexically or through a symlink (a link inside STORAGE_DIR pointing at /etc/shadow is outside).
 *
 * @returns the absolute path to open (symlinks resolved when the file exists; the lexical path
 *   when it does not, so reading it reports the missing file).
 * @throws RangeError when the path resolves outside `storageDir`, loops through symlinks or is too
 *   long: no retry can fix those. Other file-system errors (permissions, I/O) as they are.
 */
export async function resolveSourceFile(storageDir: string, sourcePath: string): Promise<string> {
  const full = resolve(storageDir, resolveSourcePath(storageDir, sourcePath));
  // Both at once: each is a round trip to the runtime's I/O threads. The root's is
  // awaited only when the file's resolved; otherwise its outcome does not matter.
  const root = Deno.realPath(storageDir);
  root.catch(() => {});
  let real: string;
  try {
    real = await Deno.realPath(full);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound || err instanceof Deno.errors.NotADirectory) {
      return full;
    }
    if (err instanceof Deno.errors.FilesystemLoop) {
      throw new RangeError(`Cannot use source_path "${sourcePath}": it loops through symlinks`);
    }
    if ((err as { code?: unknown }).code === "ENAMETOOLONG") {
      throw new RangeError(`Cannot use source_path "${sourcePath}": a name in it is too long`);
    }
    throw err;
  }
  if (outside(relative(await root, real))) {
    throw new RangeError(
      `Cannot use source_path "${sourcePath}": it resolves outside STORAGE_DIR through a symlink`,
    );
  }
  return real;
}
