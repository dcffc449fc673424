/**
 * `extractBook()` on Project Gutenberg EPUBs of each Ebookmaker generation
 * (`tests/fixtures/books/SOURCES.md`): the header and licence around the book are taken out of
 * its chapters wherever the spine documents put them, the licence is the edition's `licence`, no
 * chapter is only the frame, and every paragraph of the book is still in a chapter.
 *
 * @module
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { strFromU8, strToU8, unzipSync } from "fflate";
import { closeExtractor, extractBook, type ExtractedBook } from "../../books/extract.ts";
import { htmlText } from "../../books/sanitize.ts";
import { CONTAINER, packageDocument, xhtml, zipEpub } from "../_epub.ts";

const BOOKS = new URL("../fixtures/books/", import.meta.url).pathname;

/** Frame and licence wording that must never reach a chapter. */
const BOILERPLATE =
  /Project Gutenberg(?:-tm|™| Literary Archive| License)|(?:START|END) OF (?:THE|THIS) PROJECT GUTENBERG|This eBook is for the use of anyone|Title: /i;

/** Each fixture: its chapter titles, and the first line of its licence. */
const FIXTURES: { file: string; chapters: string[]; licenceStart: string }[] = [
  {
    // Ebookmaker 0.10: the markers in `div`s of their own; the licence is the last document.
    file: "sherlock-holmes-ebookmaker-0.10.epub",
    chapters: [
      "The Adventures of Sherlock Holmes",
      "I. A SCANDAL IN BOHEMIA",
      "XII. THE ADVENTURE OF THE COPPER BEECHES",
    ],
    licenceStart: "*** END OF THE PROJECT GUTENBERG EBOOK THE ADVENTURES OF SHERLOCK HOLMES ***",
  },
  {
    // Ebookmaker 0.10: the licence begins after the last chapter and runs into the next document.
    file: "moby-dick-ebookmaker-0.10.epub",
    chapters: [
      "MOBY-DICK; or, THE WHALE.",
      "CHAPTER 1. Loomings.",
      "CHAPTER 2. The Carpet-Bag.",
      "CHAPTER 3. The Spouter-Inn.",
      "CHAPTER 135. The Chase.—Third Day.",
      "Epilogue",
    ],
    licenceStart: "*** END OF THE PROJECT GUTENBERG EBOOK MOBY-DICK; OR THE WHALE ***",
  },
  {
    // Ebookmaker 0.9: header and licence each one `div.pgheader` of `<br/>`-broken lines.
    file: "pride-and-prejudice-ebookmaker-0.9.epub",
    chapters: ["Pride and Prejudice", "Chapter 1", "Chapter 61"],
    licenceStart: "End of the Project Gutenberg EBook of Pride and Prejudice, by Jane Austen",
  },
  {
    // Ebookmaker 0.12, EPUB 3: `#pg-header` and `#pg-footer` around the markers; the story's
    // document has no heading and the `<title>` "The Project Gutenberg eBook of …", as all do.
    file: "masque-ebookmaker-0.12.epub",
    chapters: ["The Masque of the Red Death", "Chapter 2"],
    licenceStart: "*** END OF THE PROJECT GUTENBERG EBOOK THE MASQUE OF THE RED DEATH ***",
  },
];

async function read(path: string): Promise<ExtractedBook> {
  return await extractBook(path, new AbortController().signal);
}

/** The text of every `<p>` in the archive's content documents: the book's own paragraphs. */
function paragraphs(bytes: Uint8Array): string[] {
  const texts: string[] = [];
  for (const [name, data] of Object.entries(unzipSync(bytes))) {
    if (!/\.x?html$/.test(name) || name.endsWith("toc.xhtml")) continue;
    // Ebookmaker 0.11 on sets the header's fields in `<p>`s inside its `#pg-header` section.
    const body = strFromU8(data).replace(
      /<section\b[^>]*id="pg-(?:header|footer)"[^]*?<\/section>/g,
      "",
    );
    for (const match of body.matchAll(/<p\b[^>]*>([^]*?)<\/p>/g)) {
      const text = htmlText(match[1]);
      if (text !== "") texts.push(text);
    }
  }
  return texts;
}

const flat = (text: string): string => text.replace(/\s+/g, " ").trim();

/** What a reader sees of each chapter: its title and text (an emptied wrapper shows nothing). */
const shown = (book: ExtractedBook): string[][] =>
  book.chapters.map((chapter) => [chapter.title, flat(htmlText(chapter.html))]);

for (const fixture of FIXTURES) {
  Deno.test(`extractBook() takes the Gutenberg frame out of ${fixture.file}'s chapters into its licence`, async () => {
    const path = join(BOOKS, fixture.file);
    const book = await read(path);
    assert.deepEqual(book.chapters.map((chapter) => chapter.title), fixture.chapters);
    const texts = book.chapters.map((chapter) => flat(htmlText(chapter.html)));
    for (const [index, text] of texts.entries()) {
      assert.doesNotMatch(text, BOILERPLATE, fixture.chapters[index]);
    }
    const licence = book.licence ?? "";
    assert.equal(licence.split("\n")[0], fixture.licenceStart);
    assert.match(licence, /THE FULL PROJECT GUTENBERG LICENSE/);
    // The licence's last section, which Moby-Dick's EPUB puts in a document of its own.
    assert.match(licence, /Section 5\.\s+General Information About Project Gutenberg/);
    assert.match(licence, /hear about new eBooks\.$/);
    const all = texts.join("\n");
    const kept = paragraphs(await Deno.readFile(path));
    assert.ok(kept.length >= 6, `${kept.length} paragraphs`);
    for (const paragraph of kept) assert.ok(all.includes(flat(paragraph)), paragraph);
  });
}

Deno.test("extractBook() cuts an EPUB's Gutenberg marker lying straight in the body at the marker, only at the first start marker, and only at a marker line", async () => {
  const start = "*** START OF THE PROJECT GUTENBERG EBOOK THE DOOR ***";
  const book = await read(
    await write(zipEpub({
      "META-INF/container.xml": CONTAINER,
      "OEBPS/content.opf": packageDocument({
        manifest: '<item id="a" href="a.xhtml" media-type="application/xhtml+xml"/>' +
          '<item id="b" href="b.xhtml" media-type="application/xhtml+xml"/>',
        spine: '<itemref idref="a"/><itemref idref="b"/>',
      }),
      "OEBPS/a.xhtml": xhtml(
        "x",
        `<div>Title: The Door</div>\n${start}\n<h1>One</h1><p>The door opened.</p>`,
      ),
      "OEBPS/b.xhtml": xhtml(
        "x",
        `<h1>Two</h1><p>It shut.</p>\n<blockquote><p>${start}</p></blockquote>\n` +
          "<p>Notes are at the end of the Project Gutenberg eBook.</p>",
      ),
    })),
  );
  assert.deepEqual(book.chapters.map((chapter) => chapter.title), ["One", "Two"]);
  assert.equal(flat(htmlText(book.chapters[0].html)), "The door opened.");
  assert.equal(
    flat(htmlText(book.chapters[1].html)),
    `It shut. ${start} Notes are at the end of the Project Gutenberg eBook.`,
  );
  assert.equal(book.licence, `Title: The Door\n\n${start}`);
  // A book with no frame that mentions a marker in a sentence keeps all of its text.
  const quoted = await read(
    await write(zipEpub({
      "META-INF/container.xml": CONTAINER,
      "OEBPS/content.opf": packageDocument({
        manifest: '<item id="a" href="a.xhtml" media-type="application/xhtml+xml"/>',
        spine: '<itemref idref="a"/>',
      }),
      "OEBPS/a.xhtml": xhtml("x", `<h1>One</h1><p>First.</p>\n<p>The sign read “${start}”.</p>`),
    })),
  );
  assert.equal(flat(htmlText(quoted.chapters[0].html)), `First. The sign read “${start}”.`);
  assert.equal(quoted.licence, null);
});

Deno.test("extractBook() finds an Ebookmaker 0.11 EPUB's Gutenberg frame by its ids alone and by its markers alone", async () => {
  const files = unzipSync(await Deno.readFile(join(BOOKS, "alice-gutenberg-epub2.epub")));
  const variant = (edit: (text: string) => string): Record<string, Uint8Array> =>
    Object.fromEntries(
      Object.entries(files).filter(([name]) => name !== "mimetype").map(([name, data]) => [
        name,
        name.endsWith(".html") ? strToU8(edit(strFromU8(data))) : data,
      ]),
    );
  const original = await read(join(BOOKS, "alice-gutenberg-epub2.epub"));
  assert.equal(original.chapters.length, 14);
  const unmarked = variant((text) =>
    text.replace(/\*\*\* (?:START|END) OF THE PROJECT GUTENBERG EBOOK [^*]*\*\*\*/g, "")
  );
  const unnamed = variant((text) =>
    text.replace(/ id="pg-(?:header|footer)"/g, "").replaceAll("pg-boilerplate", "")
  );
  for (const [name, edited] of [["no markers", unmarked], ["no ids", unnamed]] as const) {
    const book = await read(await write(zipEpub(edited)));
    assert.deepEqual(shown(book), shown(original), name);
    assert.match(book.licence ?? "", /THE FULL PROJECT GUTENBERG LICENSE/, name);
  }
});

let dir: string | null = null;

async function write(bytes: Uint8Array): Promise<string> {
  dir ??= await Deno.makeTempDir({ prefix: "epub_gutenberg_test_" });
  const path = join(dir, `book-${crypto.randomUUID()}.epub`);
  await Deno.writeFile(path, bytes);
  return path;
}

Deno.test("closeExtractor() after the Gutenberg EPUBs", async () => {
  closeExtractor();
  if (dir !== null) await Deno.remove(dir, { recursive: true });
});
