/**
 * `extractBook()` on plays in plain text (`books/text_headings.ts`, `books/text.ts`): a chapter
 * per act (`THE FIRST ACT`, `ACT I.`, `ACT I. SCENE I.`, `ERSTER AKT.`) with its scenes inside; a
 * chapter per scene only in a play with no act headings. The `t4` cases in
 * `tests/fixtures/cases/` are minimal forms of Project Gutenberg plays that came out as one
 * chapter; beside them, plays built here of the same kind.
 *
 * @module
 */
import assert from "node:assert/strict";
import { htmlText } from "../../books/sanitize.ts";
import { extractCase, extractFrom, titles } from "../_books.ts";

Deno.test("t4: a play's acts are its chapters, the line ending an act inside it", async () => {
  const book = await extractCase("t4-play-acts.txt");
  assert.equal(book.author, "A. Writer");
  assert.deepEqual(titles(book), ["THE FIRST ACT", "THE SECOND ACT"]);
  assert.match(htmlText(book.chapters[0].html), /END OF THE FIRST ACT\.$/);
});

Deno.test("t4b: 'ACT I. SCENE I.' opens an act, a chapter", async () => {
  const book = await extractCase("t4b-play-act-scene.txt");
  assert.deepEqual(book.chapters, [
    { title: "ACT I. SCENE I.", html: "<p>MACHEATH. Sing.</p>" },
    { title: "ACT II. SCENE I.", html: "<p>POLLY. Sing again.</p>" },
  ]);
});

Deno.test("kind of t4: acts in English and German divide a play; scenes and dialogue do not", async () => {
  const book = await extractFrom(
    "dutchman.txt",
    [
      "THE DUTCHMAN",
      "",
      "SCENE: The Norwegian Coast",
      "",
      "ERSTER AKT.",
      "",
      "    ACT I.",
      "",
      "ERSTER AUFTRITT.",
      "",
      "    SCENE I.",
      "",
      "DALAND. Second act; what's the matter with it?",
      "",
      "SCENE II. _The deck._",
      "",
      "MARY. Nothing at all.",
      "",
      "ZWEITER ACT.",
      "",
      "    ACT II.",
      "",
      "ERSTE SCENE.",
      "",
      "SENTA. Act the part.",
      "",
      "Act the Third",
      "",
      "ERIK. The end.",
      "",
    ].join("\n"),
  );
  // The German act line over the English one has nothing under it: no chapter of its own. The
  // setting line above the first act is a title page, left out with a warning.
  assert.deepEqual(titles(book), ["ACT I.", "ACT II.", "Act the Third"]);
  assert.match(htmlText(book.chapters[0].html), /^ERSTER AUFTRITT\.\s+SCENE I\.\s+DALAND/);
  assert.match(htmlText(book.chapters[0].html), /SCENE II\. _The deck\._/);
  assert.deepEqual(book.warnings?.map((warning) => warning.kind), ["front_matter_dropped"]);
});

Deno.test("kind of t4: a play with scenes and no acts is a chapter per scene", async () => {
  const book = await extractFrom(
    "sketch.txt",
    "A SKETCH\n\nSCENE I. _A room._\n\nJOHN. Hello.\n\nSCENE II. _A street._\n\nMARY. Goodbye.\n\n" +
      "The Third Scene\n\nJOHN. Again.\n",
  );
  assert.deepEqual(titles(book), [
    "SCENE I. _A room._",
    "SCENE II. _A street._",
    "The Third Scene",
  ]);
});
