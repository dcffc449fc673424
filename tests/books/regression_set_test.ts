/**
 * The regression set of real public-domain books (`tests/fixtures/books/`, see its `SOURCES.md`):
 * every book's title, author and chapter titles come out exactly as counted from the book itself
 * ("chapter counts exact"; for an EPUB, one chapter per spine item titled by its
 * navigation), language and direction where the book states them, with no Project Gutenberg
 * licence text in any chapter.
 * Extracted in process: the worker around it is `extract_test.ts`'s subject, and a fresh worker
 * per book would type-check the readers again.
 *
 * @module
 */
import assert from "node:assert/strict";
import { extractInProcess } from "../../books/extract_in_process.ts";
import { decodeBookBytes } from "../../books/decode.ts";
import { htmlText } from "../../books/sanitize.ts";
import { classifyLine } from "../../books/text_headings.ts";
import { layOut, readSet } from "../../bench/_regression_set.ts";

/** Licence and frame wording that must never reach a chapter. */
const BOILERPLATE =
  /Project Gutenberg(?:-tm| Literary Archive| License)|(?:START|END) OF (?:THE|THIS) PROJECT GUTENBERG/i;

for (const book of await readSet()) {
  Deno.test(`extractInProcess() reads ${book.file} with its ${book.chapters.length} chapters`, async () => {
    const dir = await Deno.makeTempDir({ prefix: "regression_set_test_" });
    try {
      const { path } = await layOut(book, dir);
      const extracted = await extractInProcess(path, new AbortController().signal);
      assert.equal(extracted.title, book.title);
      assert.equal(extracted.author, book.author);
      assert.deepEqual(extracted.chapters.map((chapter) => chapter.title), book.chapters);
      if (book.language !== undefined) assert.equal(extracted.language, book.language);
      if (book.direction !== undefined) assert.equal(extracted.direction, book.direction);
      // The Gutenberg frame wraps a text or HTML file and is not the book. An EPUB's spine items
      // are the publisher's pages: Moby-Dick's "Copyright Page", which its navigation lists,
      // quotes the Gutenberg header, and a reader of the EPUB sees it.
      for (const chapter of book.file.endsWith(".epub") ? [] : extracted.chapters) {
        assert.doesNotMatch(htmlText(chapter.html), BOILERPLATE, chapter.title);
      }
      // A plain-text book's part headings (`BOOK ONE`, `PART TWO`: a paragraph of one line) are
      // its text too: the words of each show in some chapter (a contents entry's, `BOOK ONE.—THE
      // COMING OF THE MARTIANS`, as the heading over the body sets them).
      if (path.endsWith(".txt")) {
        const source = decodeBookBytes(await Deno.readFile(path), "text").text;
        const words = (text: string) => text.toLowerCase().replace(/[^\p{L}\p{N}]+/gu, "");
        const shown = words(extracted.chapters.map((chapter) => htmlText(chapter.html)).join(""));
        for (const paragraph of source.split(/\r?\n(?:[ \t]*\r?\n)+/)) {
          const line = paragraph.trim();
          if (line.includes("\n") || classifyLine(line) !== "part") continue;
          assert.ok(shown.includes(words(line)), `part heading ${JSON.stringify(line)} not shown`);
        }
      }
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  });
}
