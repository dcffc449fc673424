/**
 * The regression set of real public-domain books (`tests/fixtures/books/`, see its `SOURCES.md`):
 * every book's title, author and chapter titles come out exactly as counted from the book itself
 * (issue 10, "chapter counts exact"), with no Project Gutenberg licence text in any chapter.
 *
 * @module
 */
import assert from "node:assert/strict";
import { closeExtractor, extractBook } from "../books/extract.ts";
import { htmlText } from "../books/sanitize.ts";
import { layOut, readSet } from "../bench/_regression_set.ts";

/** Licence and frame wording that must never reach a chapter. */
const BOILERPLATE =
  /Project Gutenberg(?:-tm| Literary Archive| License)|(?:START|END) OF (?:THE|THIS) PROJECT GUTENBERG/i;

for (const book of await readSet()) {
  Deno.test(`extractBook() reads ${book.file} with its ${book.chapters.length} chapters`, async () => {
    const dir = await Deno.makeTempDir({ prefix: "regression_set_test_" });
    try {
      const { path } = await layOut(book, dir);
      const extracted = await extractBook(path, new AbortController().signal);
      assert.equal(extracted.title, book.title);
      assert.equal(extracted.author, book.author);
      assert.deepEqual(extracted.chapters.map((chapter) => chapter.title), book.chapters);
      for (const chapter of extracted.chapters) {
        assert.doesNotMatch(htmlText(chapter.html), BOILERPLATE, chapter.title);
      }
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  });
}

// The extraction worker is reused from book to book (each new one type-checks on start); ended
// once the set is done.
Deno.test("closeExtractor() after the regression set", () => {
  closeExtractor();
});
