/**
 * `extractBook()` on plain-text books: chapter heading lines, title and byline, the text before
 * the first heading, contents lists, escaping, and refusing NUL bytes.
 *
 * @module
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { extractBook, UnreadableBookError } from "../../books/extract.ts";
import { extractFrom } from "../_books.ts";

Deno.test("extractBook() splits a text book at CHAPTER-style heading lines", async () => {
  const book = await extractFrom(
    "voyage.txt",
    [
      "The Long Voyage",
      "",
      "by Ann Author",
      "",
      "",
      "CHAPTER I",
      "",
      "It began at sea.",
      "",
      "Chapter 2",
      "",
      "The wind rose.",
      "",
      "Chapter Twenty-One: The Start",
      "",
      "A second start.",
      "",
      "  CHAPTER XII. THE END  ",
      "",
      "It ended.",
      "",
    ].join("\n"),
  );
  assert.equal(book.format, "text");
  assert.equal(book.title, "The Long Voyage");
  assert.equal(book.author, "Ann Author");
  assert.deepEqual(book.chapters, [
    { title: "CHAPTER I", html: "<p>It began at sea.</p>" },
    { title: "Chapter 2", html: "<p>The wind rose.</p>" },
    { title: "Chapter Twenty-One: The Start", html: "<p>A second start.</p>" },
    { title: "CHAPTER XII. THE END", html: "<p>It ended.</p>" },
  ]);
});

Deno.test("extractBook() keeps a text book's paragraphs as escaped <p> elements", async () => {
  const book = await extractFrom(
    "escapes.txt",
    "Chapter 1\n\nFish & chips <b>not bold</b>\nsecond line\n\n\"Quoted\" 'too'\r\n\r\nLast.",
  );
  assert.deepEqual(book.chapters, [{
    title: "Chapter 1",
    html: "<p>Fish &amp; chips &lt;b&gt;not bold&lt;/b&gt;\nsecond line</p>\n" +
      "<p>&quot;Quoted&quot; &#39;too&#39;</p>\n<p>Last.</p>",
  }]);
});

Deno.test("extractBook() does not take a wrapped prose line for a chapter heading", async () => {
  const book = await extractFrom(
    "wrapped.txt",
    "Chapter 1\n\nWe read the first pages and then\nchapter two of the manual, slowly.\n",
  );
  assert.equal(book.chapters.length, 1);
  assert.equal(
    book.chapters[0].html,
    "<p>We read the first pages and then\nchapter two of the manual, slowly.</p>",
  );
});

Deno.test("extractBook() makes the prose before the first heading a chapter titled like the book", async () => {
  const book = await extractFrom(
    "preface.txt",
    "Title: Field Notes\nAuthor: Bo Writer\n\nA word before we begin.\n\nCHAPTER ONE\n\nBegun.\n",
  );
  assert.equal(book.title, "Field Notes");
  assert.equal(book.author, "Bo Writer");
  assert.deepEqual(book.chapters.map((chapter) => chapter.title), ["Field Notes", "CHAPTER ONE"]);
  assert.equal(book.chapters[0].html, "<p>A word before we begin.</p>");
});

Deno.test("extractBook() skips a text book's contents list of bare headings", async () => {
  const book = await extractFrom(
    "contents.txt",
    "Tiny Tales\n\nCHAPTER I\n\nCHAPTER II\n\nCHAPTER I\n\nOnce.\n\nCHAPTER II\n\nTwice.\n",
  );
  assert.deepEqual(book.chapters, [
    { title: "CHAPTER I", html: "<p>Once.</p>" },
    { title: "CHAPTER II", html: "<p>Twice.</p>" },
  ]);
});

Deno.test("extractBook() shows a text book's part headings at the top of each part's first chapter, in every line ending", async () => {
  const text = "Two Families\n\nPART ONE\n\nChapter 1\n\nHappy families.\n\nChapter 2\n\n" +
    "Everything was upset.\n\nPART TWO\n\nChapter 1\n\nAt the end of the winter.\n";
  for (const [ending, source] of [["LF", text], ["CRLF", text.replaceAll("\n", "\r\n")]]) {
    const book = await extractFrom("parts.txt", source);
    assert.deepEqual(book.chapters, [
      { title: "Chapter 1", html: "<h2>PART ONE</h2>\n<p>Happy families.</p>" },
      { title: "Chapter 2", html: "<p>Everything was upset.</p>" },
      { title: "Chapter 1", html: "<h2>PART TWO</h2>\n<p>At the end of the winter.</p>" },
    ], ending);
  }
});

Deno.test("extractBook() reads a text book without headings as one chapter", async () => {
  const titled = await extractFrom("essay.txt", "On Walking\n\nWalking is good.\n\nDo it daily.\n");
  assert.equal(titled.title, "On Walking");
  assert.equal(titled.author, null);
  assert.deepEqual(titled.chapters, [{
    title: "On Walking",
    html: "<p>Walking is good.</p>\n<p>Do it daily.</p>",
  }]);

  // A long first paragraph is text, not a title: the file name stands in.
  const untitled = await extractFrom(
    "musings.txt",
    "This opening paragraph runs on\nover two lines.\n\nAnd then more.\n",
  );
  assert.equal(untitled.title, "musings");
  assert.equal(untitled.chapters.length, 1);
  assert.equal(untitled.chapters[0].title, "musings");
  assert.match(untitled.chapters[0].html, /^<p>This opening paragraph runs on/);
});

Deno.test("extractBook() keeps a one-line text book's only line as its text", async () => {
  const book = await extractFrom("note.txt", "Remember the milk.\n");
  assert.equal(book.title, "note");
  assert.deepEqual(book.chapters, [{ title: "note", html: "<p>Remember the milk.</p>" }]);
});

Deno.test("extractBook() does not read a lower-case 'by' line as a byline", async () => {
  const book = await extractFrom(
    "river.txt",
    "River\n\nby the water we sat.\n\nCHAPTER 1\n\nWet.\n",
  );
  assert.equal(book.author, null);
  assert.equal(book.chapters[0].html, "<p>by the water we sat.</p>");
});

// Postgres cannot store U+0000 in text: it rejected the insert, and the queue retried that as a
// transient fault three times. A NUL in plain text means binary data, so it is refused up front.
Deno.test("extractBook() refuses a text book containing a NUL byte as binary data", async () => {
  const dir = await Deno.makeTempDir({ prefix: "extract_text_test_" });
  try {
    const path = join(dir, "blob.txt");
    await Deno.writeFile(path, new TextEncoder().encode("Hello\0world\n\nmore\n"));
    await assert.rejects(extractBook(path, new AbortController().signal), (error: unknown) => {
      assert.ok(error instanceof UnreadableBookError, `expected UnreadableBookError, got ${error}`);
      assert.equal(
        error.message,
        `Cannot read text file "${path}": the file contains NUL bytes: it is binary data, not text`,
      );
      return true;
    });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("extractBook() reads a text book of 200,000 short paragraphs (verse) without overflowing", async () => {
  const lines = Array.from({ length: 200_000 }, (_, index) => `A short line ${index}`);
  const book = await extractFrom("verse.txt", `Verse\n\nby A. Poet\n\n${lines.join("\n\n")}\n`);
  assert.equal(book.title, "Verse");
  assert.equal(book.author, "A. Poet");
  assert.equal(book.chapters.length, 1);
  assert.ok(book.chapters[0].html.endsWith("<p>A short line 199999</p>"));
});

Deno.test("extractBook() does not take a heading run in to its paragraph for a chapter", async () => {
  // Moby-Dick's Cetology (PG #2701): its sections open paragraphs of chapter 32.
  const book = await extractFrom(
    "cetology.txt",
    [
      "CHAPTER 32. Cetology.",
      "",
      "First, according to magnitude I divide the whales into three primary",
      "BOOKS (subdivisible into CHAPTERS), and these shall comprehend them all.",
      "",
      "BOOK I. (_Folio_), CHAPTER I. (_Sperm Whale_).—This whale, among the",
      "English of old vaguely known as the Trumpa whale, and the Physeter",
      "whale, and the Anvil Headed whale, is the present Cachalot of the",
      "French, and the Pottsfich of the Germans, and the Macrocephalus of the",
      "Long Words. He is, without doubt, the largest inhabitant of the globe.",
      "",
      "BOOK III. (_Duodecimo_), CHAPTER II. (_Algerine Porpoise_).—A pirate.",
      "Very savage. He is only found, I think, in the Pacific. He is somewhat",
      "larger than the Huzza Porpoise, but much of the same general make.",
      "Provoke him, and he will buckle to a shark. I have lowered for him many",
      "times, but never yet saw him captured.",
      "",
      "Chapter 2 of the log book, kept by the mate through all that voyage,",
      "says nothing of the matter, nor does the third, nor any after it, and",
      "the captain's own journal is as silent on it as the grave, though he",
      "wrote in it every day of the voyage, and at length, in a fair hand;",
      "and so we must take the word of the men who were there.",
      "",
      "CHAPTER 33. The Specksnyder.",
      "",
      "Concerning the officers of the whale-craft.",
      "",
    ].join("\n"),
  );
  assert.deepEqual(book.chapters.map((chapter) => chapter.title), [
    "CHAPTER 32. Cetology.",
    "CHAPTER 33. The Specksnyder.",
  ]);
});

Deno.test("t5: a lone numeral over an illustration, among titled numerals, is a chapter", async () => {
  const book = await extractBook(
    new URL("../fixtures/cases/t5-bare-numeral-over-illustration.txt", import.meta.url).pathname,
    new AbortController().signal,
  );
  assert.deepEqual(book.chapters.map((chapter) => chapter.title), [
    "I.",
    "II. Papa se fâche.",
    "III. Voilà ce que c’est!",
  ]);
  assert.match(book.chapters[0].html, /^<p>\[Illustration: DEUX PARENTS ET DEUX ENFANTS\.\]<\/p>/);
});

Deno.test("kind of t5: only the numeral missing from the titled run is a chapter", async () => {
  const book = await extractFrom(
    "stories.txt",
    [
      "STORIES",
      "",
      "I. THE FIRST",
      "",
      "One.",
      "",
      "II.",
      "",
      "[Illustration]",
      "",
      "Two.",
      "",
      "III. THE STORY",
      "",
      "I.",
      "",
      "A section.",
      "",
      "II.",
      "",
      "Another section.",
      "",
      "III.",
      "",
      "A third.",
      "",
      "IV. THE LAST",
      "",
      "Four.",
      "",
    ].join("\n"),
  );
  // The story's sections I.–III. under "III. THE STORY" fit neither side of the run: no chapters.
  assert.deepEqual(book.chapters.map((chapter) => chapter.title), [
    "I. THE FIRST",
    "II.",
    "III. THE STORY",
    "IV. THE LAST",
  ]);
});
