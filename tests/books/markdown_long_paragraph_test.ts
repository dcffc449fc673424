/**
 * `extractBook()` on Markdown whose paragraphs are very long: up to the reader's bound it reads,
 * past it the reason says what is wrong (a paragraph too long, with its length), never "nested
 * too deeply", and says so fast.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { closeExtractor, extractBook, UnreadableBookError } from "../../books/extract.ts";
import { MAX_PARAGRAPH_CHARS } from "../../books/markdown.ts";

const WORDS = "lorem ipsum dolor sit amet, *consectetur* adipiscing `elit`, sed do ";

async function extractFrom(content: string) {
  const dir = await Deno.makeTempDir({ prefix: "markdown_long_" });
  try {
    await Deno.writeTextFile(join(dir, "book.md"), content);
    return await extractBook(join(dir, "book.md"), new AbortController().signal);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

function paragraph(chars: number, breakLines: boolean): string {
  const text = WORDS.repeat(Math.ceil(chars / WORDS.length)).slice(0, chars);
  return breakLines ? text.replace(/(.{70}) /g, "$1\n") : text;
}

Deno.test("a Markdown paragraph at most MAX_PARAGRAPH_CHARS long reads; a longer one (up to 20 MB, one line or many) is refused naming its length, fast", async () => {
  try {
    for (const chars of [10_000, MAX_PARAGRAPH_CHARS - 100]) {
      const book = await extractFrom(`# A Book\n\n## One\n\n${paragraph(chars, false)}\n`);
      assert.ok(book.chapters.length >= 1);
    }
    for (
      const [chars, breakLines] of [[MAX_PARAGRAPH_CHARS + 1, false], [20_000_000, false], [
        20_000_000,
        true,
      ]] as const
    ) {
      const t0 = performance.now();
      const err = await extractFrom(`# A Book\n\n${paragraph(chars, breakLines)}\n`).then(
        () => null,
        (e) => e,
      );
      const ms = performance.now() - t0;
      assert.ok(err instanceof UnreadableBookError, String(err));
      assert.doesNotMatch(err.message, /nested too deeply/);
      assert.match(
        err.message,
        new RegExp(`a paragraph of ${chars} characters without a blank line`),
      );
      // A linear scan refuses 20 MB in about a second here (6 s seen on 2 loaded cores); a
      // backtracking or quadratic one would take minutes.
      assert.ok(ms < 15_000, `${chars}: ${ms} ms`);
    }
  } finally {
    closeExtractor();
  }
});
