/**
 * Zip a book's unpacked EPUB folder into an `.epub`, as the regression set's EPUBs from the IDPF
 * EPUB 3 sample repository were made (`tests/fixtures/books/SOURCES.md`): the repository keeps each
 * sample unzipped, and its own `pack-single.sh` only runs epubcheck's packer over the folder. OCF
 * rules: `mimetype` first and stored; every other file deflated, under its path in the folder.
 * The output is the same bytes on every run (files in path order, one fixed time stamp), so a
 * rebuilt fixture can be compared with the committed one.
 *
 * Usage: `deno run -A bench/pack_epub.ts <folder> <out.epub>`
 *
 * @module
 */
import { type Zippable, zipSync } from "fflate";
import { join, relative, sep } from "node:path";

/** The ZIP time stamp of every entry: midnight, 1 January 1980 (the format's epoch), local time. */
const MTIME = new Date(1980, 0, 1);

/**
 * Every regular file under `dir`, as paths relative to it with `/` separators, in sorted order.
 *
 * @param dir the folder.
 * @returns the relative paths.
 */
async function filesUnder(dir: string): Promise<string[]> {
  const found: string[] = [];
  const visit = async (folder: string): Promise<void> => {
    for await (const entry of Deno.readDir(folder)) {
      const path = join(folder, entry.name);
      if (entry.isDirectory) await visit(path);
      else if (entry.isFile) found.push(relative(dir, path).split(sep).join("/"));
    }
  };
  await visit(dir);
  return found.sort();
}

/**
 * Zip an unpacked EPUB folder.
 *
 * @param dir the folder holding `mimetype`, `META-INF/` and the package's files.
 * @returns the `.epub` bytes.
 * @throws Error when the folder has no `mimetype` file.
 */
export async function packEpub(dir: string): Promise<Uint8Array> {
  const paths = await filesUnder(dir);
  if (!paths.includes("mimetype")) throw new Error(`Cannot pack "${dir}": it has no mimetype file`);
  const entries: Zippable = {
    mimetype: [await Deno.readFile(join(dir, "mimetype")), { level: 0, mtime: MTIME }],
  };
  for (const path of paths) {
    if (path === "mimetype") continue;
    entries[path] = [await Deno.readFile(join(dir, path)), { level: 9, mtime: MTIME }];
  }
  return zipSync(entries);
}

if (import.meta.main) {
  const [dir, out] = Deno.args;
  if (dir === undefined || out === undefined) {
    console.error("usage: deno run -A bench/pack_epub.ts <folder> <out.epub>");
    Deno.exit(2);
  }
  await Deno.writeFile(out, await packEpub(dir));
}
