/**
 * `extractBook()` on EPUBs whose content documents each hold several of the chapters the
 * navigation lists (Project Gutenberg's Ebookmaker splits the HTML by size): one chapter per entry
 * whose heading begins a part of the body, links following the `id`s into the chapter that now
 * holds them, and every document the navigation does not divide at chapter headings left whole.
 *
 * @module
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { closeExtractor, extractBook, type ExtractedBook } from "../../books/extract.ts";
import { htmlText } from "../../books/sanitize.ts";
import { CONTAINER, packageDocument, xhtml, zipEpub } from "../_epub.ts";

const BOOKS = new URL("../fixtures/books/", import.meta.url).pathname;

let dir: string | null = null;

async function read(bytes: Uint8Array): Promise<ExtractedBook> {
  dir ??= await Deno.makeTempDir({ prefix: "epub_split_test_" });
  const path = join(dir, `book-${crypto.randomUUID()}.epub`);
  await Deno.writeFile(path, bytes);
  return await extractBook(path, new AbortController().signal);
}

const titles = (book: ExtractedBook): string[] => book.chapters.map((chapter) => chapter.title);
const text = (html: string): string => htmlText(html).replace(/\s+/g, " ").trim();

/**
 * A book of a contents page and two documents, with these bodies and this EPUB 3 nav list (or,
 * given `navPoints`, an EPUB 2 NCX instead).
 */
function book(nav: string, b: string, c: string, navPoints: string | null = null): Uint8Array {
  const navFile: Record<string, string> = navPoints === null
    ? { "OEBPS/nav.xhtml": xhtml("Contents", `<nav epub:type="toc"><ol>${nav}</ol></nav>`) }
    : {
      "OEBPS/toc.ncx": '<ncx xmlns="http://www.daisy.org/z3986/2005/ncx/" version="2005-1">' +
        `<navMap>${navPoints}</navMap></ncx>`,
    };
  return zipEpub({
    "META-INF/container.xml": CONTAINER,
    "OEBPS/content.opf": packageDocument({
      manifest: (navPoints === null
        ? '<item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>'
        : '<item id="ncx" href="toc.ncx" media-type="application/x-dtbncx+xml"/>') +
        '<item id="a" href="a.xhtml" media-type="application/xhtml+xml"/>' +
        '<item id="b" href="b.xhtml" media-type="application/xhtml+xml"/>' +
        '<item id="c" href="c.xhtml" media-type="application/xhtml+xml"/>',
      spine: '<itemref idref="a"/><itemref idref="b"/><itemref idref="c"/>',
      spineAttributes: navPoints === null ? "" : ' toc="ncx"',
    }),
    ...navFile,
    "OEBPS/a.xhtml": xhtml(
      "x",
      '<h1>Contents</h1><p><a href="b.xhtml#two">Two</a> <a href="c.xhtml#four">Four</a></p>',
    ),
    "OEBPS/b.xhtml": xhtml("x", b),
    "OEBPS/c.xhtml": xhtml("x", c),
  });
}

const NAV = '<li><a href="a.xhtml">Contents</a></li>' +
  '<li><a href="b.xhtml#one">One</a></li><li><a href="b.xhtml#two">Two</a></li>' +
  '<li><a href="c.xhtml#three">Three</a></li><li><a href="c.xhtml#four">Four</a></li>';
const B = '<h2 id="one">One</h2>\n<p>First.</p>\n<p><a id="to-two"></a></p>\n<div><br/></div>\n' +
  '<h2 id="two">Two</h2>\n<p>Second, <a href="#one">back</a>.</p>';
const C = '<p>Second, continued.</p>\n<h2 id="three">Three</h2>\n<p>Third.</p>\n' +
  '<h2 id="four">Four</h2>\n<p>Fourth, <a href="b.xhtml#to-two">see</a>.</p>';

Deno.test("extractBook() splits an EPUB document into the chapters its navigation names at headings, links following", async () => {
  const split = await read(book(NAV, B, C));
  assert.deepEqual(titles(split), ["Contents", "One", "Two", "Three", "Four"]);
  assert.deepEqual(split.chapters.slice(1).map((chapter) => text(chapter.html)), [
    "First.",
    // The text before the next document's first chapter is the end of this one.
    "Second, back. Second, continued.",
    "Third.",
    "Fourth, see.",
  ]);
  // A link into a split document lands in the chapter that holds its id; the empty anchor before
  // a heading went with that heading's chapter.
  assert.match(split.chapters[0].html, /href="3\.html#two"/);
  assert.match(split.chapters[0].html, /href="5\.html#four"/);
  assert.match(split.chapters[2].html, /href="2\.html#one"/);
  assert.match(split.chapters[2].html, /id="to-two"/);
  assert.match(split.chapters[4].html, /href="3\.html#to-two"/);
  assert.deepEqual(split.warnings, []);
});

Deno.test("extractBook() leaves an EPUB document whole when its navigation does not name chapter headings in it", async () => {
  const cases: [string, string, string[]][] = [
    // Entries nested under the document's own entry are sections of one chapter.
    [
      '<li><a href="b.xhtml">Part</a><ol><li><a href="b.xhtml#one">One</a></li>' +
      '<li><a href="b.xhtml#two">Two</a></li></ol></li>',
      B,
      ["Part"],
    ],
    // Fragments on sections, not headings.
    [
      '<li><a href="b.xhtml#s1">One</a></li><li><a href="b.xhtml#s2">Two</a></li>',
      '<section id="s1"><p>First.</p></section><section id="s2"><p>Second.</p></section>',
      ["One"],
    ],
    // A title page's h1 over a contents h2: front matter, not two chapters.
    [
      '<li><a href="b.xhtml#one">One</a></li><li><a href="b.xhtml#two">Two</a></li>',
      '<h1 id="one">One</h1><p>By Someone.</p><h2 id="two">Two</h2><p>Second.</p>',
      ["One"],
    ],
    // A heading after text in its wrapper: it begins no child of the body.
    [
      '<li><a href="b.xhtml#one">One</a></li><li><a href="b.xhtml#two">Two</a></li>',
      '<div><p>Before.</p><h2 id="one">One</h2><p>First.</p></div><h2 id="two">Two</h2><p>2</p>',
      ["One"],
    ],
    // As many sections as chapters at the same depth: no rank is the chapters'.
    [
      '<li><a href="b.xhtml#one">One</a></li><li><a href="b.xhtml#one-a">One a</a></li>' +
      '<li><a href="b.xhtml#two">Two</a></li><li><a href="b.xhtml#two-a">Two a</a></li>',
      '<h2 id="one">One</h2><h3 id="one-a">One a</h3><p>1</p>' +
      '<h2 id="two">Two</h2><h3 id="two-a">Two a</h3><p>2</p>',
      ["One"],
    ],
  ];
  for (const [nav, body, expected] of cases) {
    const whole = await read(book(nav, body, "<h2>Last</h2><p>End.</p>"));
    assert.deepEqual(titles(whole).slice(1, -1), expected, body);
  }
  // Sections nested under a chapter, in the EPUB 3 nav and in an EPUB 2 NCX.
  const sections = '<h1 id="one">One</h1><p>1</p><h2 id="one-a">One a</h2><p>a</p>' +
    '<h2 id="one-b">One b</h2><p>b</p>';
  const point = (id: string, label: string, inner = ""): string =>
    `<navPoint id="p-${id}"><navLabel><text>${label}</text></navLabel>` +
    `<content src="b.xhtml#${id}"/>${inner}</navPoint>`;
  for (
    const nested of [
      book(
        '<li><a href="b.xhtml#one">One</a><ol><li><a href="b.xhtml#one-a">One a</a></li>' +
          '<li><a href="b.xhtml#one-b">One b</a></li></ol></li>',
        sections,
        "<h2>Last</h2><p>End.</p>",
      ),
      book(
        "",
        sections,
        "<h2>Last</h2><p>End.</p>",
        point("one", "One", point("one-a", "One a") + point("one-b", "One b")),
      ),
    ]
  ) {
    assert.deepEqual(titles(await read(nested)).slice(1, -1), ["One"]);
  }
});

Deno.test("extractBook() splits an EPUB document only at the rank most of its entries share, a heading in the same part staying in it", async () => {
  const nav = '<li><a href="b.xhtml#one">One</a></li><li><a href="b.xhtml#one-a">One a</a></li>' +
    '<li><a href="b.xhtml#two">Two</a></li><li><a href="b.xhtml#two-b">Two b</a></li>' +
    '<li><a href="b.xhtml#three">Three</a></li>';
  const body = '<h2 id="one">One</h2><h3 id="one-a">One a</h3><p>1</p>' +
    '<div><h2 id="two">Two</h2><p>2</p><h2 id="two-b">Two b</h2><p>2b</p></div>' +
    '<h2 id="three">Three</h2><p>3</p>';
  const split = await read(book(nav, body, "<h2>Last</h2><p>End.</p>"));
  assert.deepEqual(titles(split), ["Contents", "One", "Two", "Three", "Last"]);
  assert.deepEqual(split.chapters.slice(1, 4).map((chapter) => text(chapter.html)), [
    "One a1",
    "2Two b2b",
    "3",
  ]);
});

Deno.test("extractBook() reads Moby-Dick's Gutenberg EPUB as the chapters its NCX lists", async () => {
  const moby = await extractBook(
    join(BOOKS, "moby-dick-ebookmaker-0.10.epub"),
    new AbortController().signal,
  );
  assert.deepEqual(titles(moby), [
    "MOBY-DICK; or, THE WHALE.",
    "CHAPTER 1. Loomings.",
    "CHAPTER 2. The Carpet-Bag.",
    "CHAPTER 3. The Spouter-Inn.",
    "CHAPTER 135. The Chase.—Third Day.",
    "Epilogue",
  ]);
  assert.match(text(moby.chapters[1].html), /^Call me Ishmael\./);
  assert.match(text(moby.chapters[5].html), /only found another orphan\.$/);
});

Deno.test("closeExtractor() after the split EPUBs", async () => {
  closeExtractor();
  if (dir !== null) await Deno.remove(dir, { recursive: true });
});
