/**
 * The regression set of real public-domain books (`tests/fixtures/books/`, sources in its
 * `SOURCES.md`): reading its manifest `books.json` and laying a book out as a file the extractor
 * can read (`.gz` fixtures are decompressed into a temporary directory). Shared by
 * `tests/books/regression_set_test.ts` (exact chapters) and `bench/fidelity.ts` (the fidelity report).
 * An EPUB is listed with its expected values, language and direction too; it needs no compression
 * (it is a ZIP already).
 *
 * @module
 */
import { join } from "node:path";

/** Where the set lives. */
export const SET_DIR = new URL("../tests/fixtures/books/", import.meta.url);

/** One book of the set and what a reader sees in it, counted from the book itself. */
export interface SetBook {
  /** File name under `SET_DIR`; a `.gz` suffix is taken off when it is laid out. */
  file: string;
  /** Book title as the extractor must report it. */
  title: string;
  /** Author as the book names it, or `null`. */
  author: string | null;
  /** Every chapter title, in reading order. */
  chapters: string[];
  /** The edition's language and page-progression direction, where the book states them (EPUB). */
  language?: string;
  direction?: "ltr" | "rtl";
}

/**
 * Read the manifest.
 *
 * @returns the books in manifest order.
 * @throws Error when `books.json` is missing or not an array of books.
 */
export async function readSet(): Promise<SetBook[]> {
  const books: unknown = JSON.parse(await Deno.readTextFile(new URL("books.json", SET_DIR)));
  if (!Array.isArray(books)) throw new Error("Cannot read books.json: expected an array");
  return books as SetBook[];
}

/**
 * Write a book of the set into `dir` as the extractor reads it (decompressed when gzipped).
 *
 * @param book the book.
 * @param dir an existing directory.
 * @returns the path of the written file and its size in bytes.
 */
export async function layOut(book: SetBook, dir: string): Promise<{ path: string; bytes: number }> {
  const source = new URL(book.file, SET_DIR);
  const path = join(dir, book.file.replace(/\.gz$/, ""));
  if (!book.file.endsWith(".gz")) {
    await Deno.copyFile(source, path);
  } else {
    const file = await Deno.open(source);
    await file.readable.pipeThrough(new DecompressionStream("gzip"))
      .pipeTo((await Deno.create(path)).writable);
  }
  return { path, bytes: (await Deno.stat(path)).size };
}
