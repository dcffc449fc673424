/**
 * `extractBook()` on Markdown and HTML books: title heading and byline, where chapters split,
 * front matter and `<meta>`, the sanitising every chapter body goes through, and U+0000 replaced.
 *
 * @module
 */
import assert from "node:assert/strict";
import { type ExtractedBook } from "../../books/extract.ts";
import { extractFrom } from "../_books.ts";

/** Markup a sanitiser must remove, with markers that must not survive. */
const HOSTILE = '<script>stealCookies()</script><p onclick="evil()">Safe text ' +
  '<a href="javascript:evil()">bad link</a> <a href="https://example.org/">good link</a></p>' +
  '<style>p { color: red }</style><iframe src="https://example.org/"></iframe>';

function assertSanitised(html: string): void {
  for (const marker of ["stealCookies", "<script", "onclick", "evil", "<style", "<iframe"]) {
    assert.ok(!html.includes(marker), `found ${JSON.stringify(marker)} in ${html}`);
  }
  assert.ok(html.includes('<a href="https://example.org/">good link</a>'), html);
  assert.ok(html.includes("Safe text"), html);
}

Deno.test("extractBook() splits a Markdown book with one title heading at ##", async () => {
  const book = await extractFrom(
    "garden.md",
    [
      "# The *Secret* Garden",
      "",
      "by Frances Hodgson",
      "",
      "## There Is No One Left",
      "",
      "When Mary was *sent* to live.",
      "",
      "### A scene break",
      "",
      "More.",
      "",
      "## The Key to the Garden",
      "",
      "- a list",
      "",
    ].join("\n"),
  );
  assert.equal(book.format, "markdown");
  assert.equal(book.title, "The Secret Garden");
  assert.equal(book.author, "Frances Hodgson");
  assert.deepEqual(book.chapters, [
    {
      title: "There Is No One Left",
      html: "<p>When Mary was <em>sent</em> to live.</p>\n<h3>A scene break</h3>\n<p>More.</p>",
    },
    { title: "The Key to the Garden", html: "<ul>\n<li>a list</li>\n</ul>" },
  ]);
});

Deno.test("extractBook() splits a Markdown book with several # headings at #", async () => {
  const book = await extractFrom(
    "parts.md",
    [
      "---",
      'title: "Two Parts"',
      "author: Cy Writer",
      "---",
      "Opening words.",
      "",
      "# Part `One`",
      "",
      "## Inside part one",
      "",
      "First.",
      "",
      "# Part Two",
      "",
      "Second.",
    ].join("\n"),
  );
  assert.equal(book.title, "Two Parts");
  assert.equal(book.author, "Cy Writer");
  assert.deepEqual(book.chapters.map((chapter) => chapter.title), [
    "Two Parts",
    "Part One",
    "Part Two",
  ]);
  assert.equal(book.chapters[0].html, "<p>Opening words.</p>");
  assert.equal(book.chapters[1].html, "<h2>Inside part one</h2>\n<p>First.</p>");
});

Deno.test("extractBook() reads a Markdown book without headings as one chapter", async () => {
  const book = await extractFrom("loose_notes.markdown", "Just a paragraph.\n\nAnd another.\n");
  assert.equal(book.title, "loose_notes");
  assert.equal(book.author, null);
  assert.deepEqual(book.chapters, [{
    title: "loose_notes",
    html: "<p>Just a paragraph.</p>\n<p>And another.</p>",
  }]);
});

Deno.test("extractBook() sanitises the raw HTML in a Markdown book", async () => {
  const book = await extractFrom("raw.md", `# Raw\n\n## One\n\n${HOSTILE}\n`);
  assert.equal(book.chapters.length, 1);
  assertSanitised(book.chapters[0].html);
});

Deno.test("extractBook() splits an HTML book whose only h1 is its title at h2", async () => {
  const book = await extractFrom(
    "moor.html",
    `<!DOCTYPE html>
<html><head>
  <title>Wild Moor</title>
  <meta name="author" content="Em Brontë">
</head><body>
  <h1>Wild Moor</h1>
  <p>by Somebody Else</p>
  <p>A foreword &amp; a welcome.</p>
  <section><h2>Arrival</h2><p>We came<br>in rain.</p></section>
  <section><h2>Departure</h2><p>We left.</p><img src="moor.png" alt="The moor"></section>
</body></html>`,
  );
  assert.equal(book.format, "html");
  assert.equal(book.title, "Wild Moor");
  assert.equal(book.author, "Em Brontë");
  assert.deepEqual(book.chapters, [
    { title: "Wild Moor", html: "<p>A foreword &amp; a welcome.</p>" },
    { title: "Arrival", html: "<p>We came<br />in rain.</p>" },
    { title: "Departure", html: '<p>We left.</p><img src="moor.png" alt="The moor" />' },
  ]);
});

// The level that divides the book is the highest one used twice; a lower heading stays
// inside its chapter.
Deno.test("extractBook() splits an HTML book at h1 when h1s are chapters, keeping h2 inside", async () => {
  const book = await extractFrom(
    "acts.htm",
    `<body>
  <h1>Act I</h1><p>One.</p>
  <h2>Scene 2</h2><p>Two.</p>
  <div><h1>Act  II</h1><p>Three.</p></div>
  <h1></h1><p>Four.</p>
</body>`,
  );
  // No <title>: the first h1 names the book; no <meta>, no byline: no author.
  assert.equal(book.title, "Act I");
  assert.equal(book.author, null);
  assert.deepEqual(book.chapters, [
    { title: "Act I", html: "<p>One.</p>\n  <h2>Scene 2</h2><p>Two.</p>" },
    { title: "Act II", html: "<p>Three.</p>" },
    { title: "Chapter 3", html: "<p>Four.</p>" },
  ]);
});

Deno.test("extractBook() takes an HTML book's author from its byline without <meta>", async () => {
  const book = await extractFrom(
    "byline.xhtml",
    `<?xml version="1.0" encoding="utf-8"?>
<html xmlns="http://www.w3.org/1999/xhtml"><head><title/></head>
<body><h1>Short&#160;Book</h1><p>By Di Writer</p><h2>Only</h2><p>Text.</p></body></html>`,
  );
  // The self-closed <title/> must not swallow the page; an empty title falls back to the h1,
  // its no-break space collapsed like any whitespace.
  assert.equal(book.title, "Short Book");
  assert.equal(book.author, "Di Writer");
  assert.deepEqual(book.chapters, [{ title: "Only", html: "<p>Text.</p>" }]);
});

Deno.test("extractBook() sanitises an HTML book's chapters", async () => {
  const book = await extractFrom(
    "hostile.html",
    `<html><head><title>Hostile</title><script>alert(1)</script></head>
<body onload="evil()"><h2>Trap</h2>${HOSTILE}<svg><text>cover words</text></svg></body></html>`,
  );
  assert.equal(book.chapters.length, 1);
  assertSanitised(book.chapters[0].html);
  // Inline SVG is kept with its text (sanitised), like everything else a reader sees.
  assert.ok(book.chapters[0].html.includes("<svg><text>cover words</text></svg>"));
  assert.ok(!book.chapters[0].html.includes("alert"), book.chapters[0].html);
});

/** Every string of a book, for checking what may reach the database. */
function bookStrings(book: ExtractedBook): string[] {
  return [
    book.title,
    book.author ?? "",
    ...book.chapters.flatMap((chapter) => [chapter.title, chapter.html]),
  ];
}

// The HTML and CommonMark specs replace U+0000 with U+FFFD; Postgres cannot store U+0000 in text.
Deno.test("extractBook() replaces NUL in a Markdown book's title and chapters with U+FFFD", async () => {
  const book = await extractFrom(
    "nul.md",
    "---\nauthor: Ann\0Author\n---\n# The\0Title\n\n## One\0Two\n\nA\0B and &#0; and <b>c\0d</b>\n",
  );
  for (const text of bookStrings(book)) assert.ok(!text.includes("\0"), JSON.stringify(text));
  assert.equal(book.title, "The\uFFFDTitle");
  assert.equal(book.author, "Ann\uFFFDAuthor");
  assert.equal(book.chapters[0].title, "One\uFFFDTwo");
  assert.match(book.chapters[0].html, /A\uFFFDB and/);
});

Deno.test("extractBook() replaces NUL in an HTML book's metadata and chapters with U+FFFD", async () => {
  const book = await extractFrom(
    "nul.html",
    '<html><head><title>The\0Title</title><meta name="author" content="Ann\0Author"></head>' +
      "<body><h2>One\0Two</h2><p>A\0B and &#0; and <b>c\0d</b></p></body></html>",
  );
  for (const text of bookStrings(book)) assert.ok(!text.includes("\0"), JSON.stringify(text));
  assert.equal(book.title, "The\uFFFDTitle");
  assert.equal(book.author, "Ann\uFFFDAuthor");
  assert.equal(book.chapters[0].title, "One\uFFFDTwo");
  assert.match(book.chapters[0].html, /A\uFFFDB and/);
});
