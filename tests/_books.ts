/**
 * Running `extractBook()` in the book tests: on a case file of `tests/fixtures/cases/`, or on a
 * book written to a temporary directory under the name given (its extension picks the reader).
 *
 * @module
 */
import { join } from "node:path";
import { extractBook, type ExtractedBook } from "../books/extract.ts";

const CASES = new URL("fixtures/cases/", import.meta.url);

/** Extract `tests/fixtures/cases/<name>`. */
export function extractCase(name: string): Promise<ExtractedBook> {
  return extractBook(new URL(name, CASES).pathname, new AbortController().signal);
}

/** Extract `content` written as `<temp dir>/<name>`; the directory is removed afterwards. */
export async function extractFrom(
  name: string,
  content: string | Uint8Array,
): Promise<ExtractedBook> {
  const dir = await Deno.makeTempDir({ prefix: "textstack_book_test_" });
  try {
    const path = join(dir, name);
    if (typeof content === "string") await Deno.writeTextFile(path, content);
    else await Deno.writeFile(path, content);
    return await extractBook(path, new AbortController().signal);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** The chapters' titles, in order. */
export function titles(book: ExtractedBook): string[] {
  return book.chapters.map((chapter) => chapter.title);
}
