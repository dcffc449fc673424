/**
 * `extractBook()` on the markup Project Gutenberg's HTML files are made of: the empty
 * `<a name … id …><!-- H2 anchor --></a>` set before each chapter heading, which the contents
 * links name, and titles set as several headings in a row. The fixtures are trimmed from real
 * files (`tests/fixtures/cases/`, cited in `tests/fixtures/books/SOURCES.md`).
 *
 * @module
 */
import assert from "node:assert/strict";
import { type ExtractedBook } from "../../books/extract.ts";
import { htmlText } from "../../books/sanitize.ts";
import { brokenLinks } from "../../bench/_book_links.ts";
import { extractCase, extractFrom } from "../_books.ts";

const CASES = new URL("../fixtures/cases/", import.meta.url);

/**
 * Where each of the source's `#id` links lands: the title of the chapter holding the id, and the
 * text a reader sees in that chapter before it (`""`: the link opens the chapter). Read from the
 * source, since the book leaves its contents list out.
 */
function landings(
  book: ExtractedBook,
  source: string,
): { link: string; chapter: string; before: string }[] {
  const links = source.matchAll(/<a href\s*=\s*"#([^"]+)"\s*>(.*?)<\/a>/gs);
  return [...links].map(([, id, text]) => {
    const target = book.chapters.find((chapter) => chapter.html.includes(` id="${id}"`));
    assert.ok(target !== undefined, `#${id} is in no chapter`);
    const at = target.html.indexOf(` id="${id}"`);
    const before = htmlText(target.html.slice(0, at).replace(/<[^>]*$/, ""));
    return { link: htmlText(text), chapter: target.title, before };
  });
}

function fixtureText(name: string): Promise<string> {
  return Deno.readTextFile(new URL(name, CASES));
}

function missing(book: ExtractedBook): string[] {
  return (book.warnings ?? []).filter((warning) => warning.kind === "resource_missing")
    .map((warning) => warning.message);
}

Deno.test("extractBook() gives Moby-Dick's chapter anchors to the chapters they open, so each contents link opens its chapter", async () => {
  const book = await extractCase("moby-dick-anchors.html");
  const source = await fixtureText("moby-dick-anchors.html");
  assert.deepEqual(book.chapters.map((chapter) => chapter.title).slice(1), [
    "ETYMOLOGY.",
    "EXTRACTS. (Supplied by a Sub-Sub-Librarian).",
    "CHAPTER 1. Loomings.",
    "CHAPTER 2. The Carpet-Bag.",
    "CHAPTER 3. The Spouter-Inn.",
  ]);
  assert.deepEqual(landings(book, source), [
    { link: "ETYMOLOGY.", chapter: "ETYMOLOGY.", before: "" },
    {
      link: "EXTRACTS (Supplied by a Sub-Sub-Librarian).",
      chapter: "EXTRACTS. (Supplied by a Sub-Sub-Librarian).",
      before: "",
    },
    { link: "CHAPTER 1. Loomings.", chapter: "CHAPTER 1. Loomings.", before: "" },
    { link: "CHAPTER 2. The Carpet-Bag.", chapter: "CHAPTER 2. The Carpet-Bag.", before: "" },
    { link: "CHAPTER 3. The Spouter-Inn.", chapter: "CHAPTER 3. The Spouter-Inn.", before: "" },
  ]);
  // The chapter before ends with its own text, not the next one's anchor.
  assert.doesNotMatch(book.chapters[3].html, /link2HCH0002/);
  assert.deepEqual(brokenLinks(book), []);
  assert.deepEqual(missing(book), []);
});

Deno.test("extractBook() keeps the anchors of a heading with nothing under it (Leaves of Grass's BOOK I) at the top of the chapter it is carried into", async () => {
  const book = await extractCase("leaves-of-grass-anchors.html");
  const source = await fixtureText("leaves-of-grass-anchors.html");
  // The excerpt has nothing before BOOK I but the contents list, which is left out.
  assert.deepEqual(book.chapters.map((chapter) => chapter.title), [
    "One's-Self I Sing",
    "As I Ponder'd in Silence",
  ]);
  assert.deepEqual(landings(book, source), [
    { link: "BOOK I. INSCRIPTIONS", chapter: "One's-Self I Sing", before: "" },
    { link: "One's-Self I Sing", chapter: "One's-Self I Sing", before: "" },
    { link: "As I Ponder'd in Silence", chapter: "As I Ponder'd in Silence", before: "" },
  ]);
  // The part heading is still shown, above the poem.
  assert.match(htmlText(book.chapters[0].html), /^BOOK I\. INSCRIPTIONS One's-self I sing/);
  assert.deepEqual(missing(book), []);
});

Deno.test("kind of Moby-Dick: an anchor that shows nothing, bare, in a wrapper or in the chapter's own <div>, goes with the heading after it", async () => {
  const anchor = (id: string) => `<a name="${id}" id="${id}"><!--  H2 anchor --></a>`;
  const spacer = '<div style="height: 4em;"><br /><br /><br /><br /></div>';
  const shapes: Record<string, (id: string, heading: string) => string> = {
    bare: (id, heading) => `${anchor(id)}\n<h2>${heading}</h2>`,
    "in a <p> with <br>s": (id, heading) =>
      `<p><br /> <br /> ${anchor(id)}</p>\n${spacer}\n<h2>${heading}</h2>`,
    "in the chapter's <div>": (id, heading) =>
      `<div class="chapter">\n${anchor(id)}\n<h2>${heading}</h2>`,
    "name only, in a <div>": (id, heading) =>
      `<div><a name="${id}"></a></div><hr />\n<h2>${heading}</h2>`,
  };
  for (const [shape, open] of Object.entries(shapes)) {
    const close = shape === "in the chapter's <div>" ? "</div>" : "";
    const chapters = [1, 2, 3].map((n) =>
      `${open(`ch${n}`, `CHAPTER ${n}. Title ${n}.`)}\n<p>Text of chapter ${n}.</p>${close}`
    );
    const source = `<html><head><title>Anchors</title></head><body><h1>Anchors</h1>
<blockquote><p><a href="#ch1">CHAPTER 1. Title 1.</a></p><p><a href="#ch2">CHAPTER 2. Title 2.</a></p>
<p><a href="#ch3">CHAPTER 3. Title 3.</a></p></blockquote>
<p>A note before the chapters: begin with <a href="#ch2">the second</a> if you like.</p>
${chapters.join("\n")}
</body></html>`;
    const book = await extractFrom("anchors.html", source);
    // The note's link, in running text, is kept, and opens its chapter.
    assert.match(book.chapters[0].html, /<a href="3\.html#ch2">the second<\/a>/, shape);
    assert.deepEqual(
      landings(book, source).slice(0, 3),
      [1, 2, 3].map((n) => ({
        link: `CHAPTER ${n}. Title ${n}.`,
        chapter: `CHAPTER ${n}. Title ${n}.`,
        before: "",
      })),
      shape,
    );
    assert.equal(htmlText(book.chapters[1].html), "Text of chapter 1.", shape);
  }
});

Deno.test("extractBook() leaves out a contents list whose links open chapters, in any wrapper, and keeps a list of other links", async () => {
  // Moby-Dick's contents: a <blockquote> of <p class="toc"> lines, one link each, indented.
  const moby = await extractCase("moby-dick-anchors.html");
  assert.doesNotMatch(moby.chapters[0].html, /href=/);
  assert.match(htmlText(moby.chapters[0].html), /^Original Transcriber’s Notes:/);
  const plates = (n: number) => `<p class="toc"><a href="#plate${n}">PLATE ${n}</a></p>\n      `;
  // A list of plates (links to pictures, not to chapters' starts) stays, its links landing.
  const kept = await extractFrom(
    "plates.html",
    `<html><head><title>Plates</title></head><body><h1>Plates</h1>
<h2>LIST OF THE PLATES</h2><blockquote>\n      ${[1, 2, 3].map(plates).join("")}</blockquote>
<h2>CHAPTER I.</h2><p id="plate1">[Plate 1]</p><p>One.</p>
<h2>CHAPTER II.</h2><p id="plate2">[Plate 2]</p><p>Two.</p><p id="plate3">[Plate 3]</p>
</body></html>`,
  );
  assert.equal(kept.chapters[0].title, "LIST OF THE PLATES");
  assert.deepEqual([...kept.chapters[0].html.matchAll(/href="([^"]*)"/g)].map((m) => m[1]), [
    "2.html#plate1",
    "3.html#plate2",
    "3.html#plate3",
  ]);
});

Deno.test("extractBook() reads a title set as three h1s in a row as one heading, and the title on the cover and the title page as no chapter", async () => {
  // The Gutenberg edition of Pinero's play sets "THE" / "MIND THE PAINT" / "GIRL" as three h1s,
  // once on the cover and once on the title page.
  const book = await extractCase("mind-the-paint-girl-title.html");
  assert.deepEqual(book.chapters.map((chapter) => chapter.title), [
    "The “Mind the Paint” Girl",
    "THE FIRST ACT",
    "THE SECOND ACT",
  ]);
  // The front matter is one chapter: the cover's picture, the title page's lines, the copyright.
  const front = htmlText(book.chapters[0].html);
  assert.match(front, /A COMEDY In Four Acts/);
  assert.match(front, /Copyright 1912/);
  assert.doesNotMatch(front, /GIRL/);
  // "By ARTHUR PINERO" under "In Four Acts" stays a byline.
  assert.equal(book.author, "ARTHUR PINERO");
});

Deno.test("extractBook() joins <h2>THE</h2><h1>FLYING DUTCHMAN</h1> into one heading, and no two chapters share a name", async () => {
  const book = await extractCase("flying-dutchman-title.html");
  const titles = book.chapters.map((chapter) => chapter.title);
  assert.ok(titles.includes("THE FLYING DUTCHMAN"), titles.join(" | "));
  assert.equal(new Set(titles).size, titles.length, titles.join(" | "));
  assert.deepEqual(titles.slice(-3), ["ACT I.", "ACT II.", "ACT III."]);
  // <h6>BY</h6> over <h4>RICHARD WAGNER</h4> is one line, a byline.
  assert.equal(book.author, "RICHARD WAGNER");
});

Deno.test("kind of Mind the Paint: headings in a row join only as one title's lines", async () => {
  const body = (headings: string) =>
    `<html><head><title>Book</title></head><body>${headings}<p>Text.</p>` +
    "<h2>CHAPTER I.</h2><p>One.</p><h2>CHAPTER II.</h2><p>Two.</p></body></html>";
  const cases: [string, string[]][] = [
    // Same or higher rank, nothing between: one heading (a comment is nothing).
    ["<h2>THE</h2> <h2>LONG</h2><!-- x --><h2>NIGHT</h2>", ["THE LONG NIGHT"]],
    ["<h3>THE</h3>\n<h2>LONG NIGHT</h2>", ["THE LONG NIGHT"]],
    // A lower rank after is a subtitle; text or an element between keeps them apart.
    ["<h2>THE LONG NIGHT</h2><h3>A Story</h3>", ["THE LONG NIGHT"]],
    ["<h2>THE</h2><p>x</p><h2>LONG NIGHT</h2>", ["THE", "LONG NIGHT"]],
    ["<h2>THE</h2>x<h2>LONG NIGHT</h2>", ["THE", "LONG NIGHT"]],
    // A part over its first chapter, a preface: headings of their own.
    ["<h2>BOOK I.</h2><h2>THE LONG NIGHT</h2>", ["THE LONG NIGHT"]],
    ["<h2>PREFACE</h2><h2>THE LONG NIGHT</h2>", ["THE LONG NIGHT"]],
  ];
  for (const [headings, expected] of cases) {
    const book = await extractFrom("joined.html", body(headings));
    const titles = book.chapters.map((chapter) => chapter.title);
    assert.deepEqual(titles.slice(0, -2), expected, headings);
  }
});

Deno.test("kind of Moby-Dick: the same book with CRLF line ends or a BOM gives the same chapters", async () => {
  // The file, as Gutenberg ships it, opens with a BOM.
  const source = (await fixtureText("moby-dick-anchors.html")).replace(/^\uFEFF/, "");
  const text = (book: ExtractedBook) =>
    book.chapters.map((chapter) => [chapter.title, htmlText(chapter.html)]);
  const expected = text(await extractFrom("moby.html", source));
  for (const variant of [source.replace(/\n/g, "\r\n"), `\uFEFF${source}`]) {
    assert.deepEqual(text(await extractFrom("moby.html", variant)), expected);
  }
});
