/**
 * `extractBook()` on EPUBs built here with fflate: metadata, spine order, chapter titles and
 * sanitising, U+0000 replaced, and every way a broken archive is reported as an
 * `UnreadableBookError`.
 *
 * @module
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { strToU8, type Zippable, zipSync } from "fflate";
import { extractBook, type ExtractedBook, UnreadableBookError } from "../../books/extract.ts";

const CONTAINER = `<?xml version="1.0" encoding="UTF-8"?>
<container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">
  <rootfiles>
    <rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>
  </rootfiles>
</container>`;

function opf(manifest: string, spine: string): string {
  return `<?xml version="1.0" encoding="UTF-8"?>
<package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="uid">
  <metadata xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:opf="http://www.idpf.org/2007/opf">
    <dc:identifier id="uid">urn:uuid:0b5c7d1e-0000-4000-8000-000000000001</dc:identifier>
    <dc:title id="t">  The Three
      Doors </dc:title>
    <dc:creator id="a1" opf:role="aut">Ada Writer</dc:creator>
    <dc:creator id="a2">Bo Cowriter</dc:creator>
    <dc:creator id="ill">Ivo Drawer</dc:creator>
    <meta refines="#ill" property="role" scheme="marc:relators">ill</meta>
  </metadata>
  <manifest>
    <item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>
${manifest}
  </manifest>
  <spine>
${spine}
  </spine>
</package>`;
}

/** Manifest in file order 1, 2, 3; spine in reading order 3, 1, 2. */
const MANIFEST = `
    <item id="door1" href="text/first%20door.xhtml" media-type="application/xhtml+xml"/>
    <item id="door2" href="text/door2.xhtml" media-type="application/xhtml+xml"/>
    <item id="door3" href="./text/../text/door3.xhtml#top" media-type="application/xhtml+xml"/>`;
const SPINE = `
    <itemref idref="door3"/>
    <itemref idref="door1"/>
    <itemref idref="door2" linear="no"/>`;

function xhtml(head: string, body: string): string {
  return `<?xml version="1.0" encoding="utf-8"?>
<!DOCTYPE html>
<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops">
<head>${head}</head>
<body>${body}</body>
</html>`;
}

/** The files of a well-formed three-chapter EPUB; tests break copies of it. */
function bookFiles(): Record<string, string> {
  return {
    "META-INF/container.xml": CONTAINER,
    "OEBPS/content.opf": opf(MANIFEST, SPINE),
    "OEBPS/nav.xhtml": xhtml("<title>Contents</title>", "<nav epub:type='toc'></nav>"),
    "OEBPS/text/first door.xhtml": xhtml(
      "<title>ignored when there is a heading</title>",
      '<section><h2 class="c">The&nbsp;First  Door</h2><p>Opened <em>slowly</em>.<br/></p>' +
        '<div/><p>Then <a href="door2.xhtml#x" onclick="evil()">onward</a>.</p></section>',
    ),
    "OEBPS/text/door2.xhtml": xhtml(
      "<title>Door Two</title><style>p { color: red }</style>",
      "<p>No heading here.</p><script>stealCookies()</script>",
    ),
    "OEBPS/text/door3.xhtml": xhtml("<title/>", '<p id="top">Before any door.</p>'),
  };
}

function zip(files: Record<string, string>): Uint8Array {
  const entries: Zippable = { mimetype: [strToU8("application/epub+zip"), { level: 0 }] };
  for (const [name, content] of Object.entries(files)) entries[name] = strToU8(content);
  return zipSync(entries);
}

async function extractFrom(name: string, bytes: Uint8Array): Promise<ExtractedBook> {
  const dir = await Deno.makeTempDir({ prefix: "extract_epub_test_" });
  try {
    await Deno.writeFile(join(dir, name), bytes);
    return await extractBook(join(dir, name), new AbortController().signal);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

async function assertUnreadable(bytes: Uint8Array, reason: string | RegExp): Promise<void> {
  await assert.rejects(extractFrom("broken.epub", bytes), (error: unknown) => {
    assert.ok(error instanceof UnreadableBookError, `expected UnreadableBookError, got ${error}`);
    assert.match(error.message, /^Cannot read EPUB ".*broken\.epub": /);
    const actual = error.message.replace(/^Cannot read EPUB ".*broken\.epub": /, "");
    if (typeof reason === "string") assert.equal(actual, reason);
    else assert.match(actual, reason);
    return true;
  });
}

Deno.test("extractBook() reads an EPUB's chapters in spine order", async () => {
  const book = await extractFrom("doors.epub", zip(bookFiles()));
  assert.equal(book.format, "epub");
  assert.deepEqual(book.chapters.map((chapter) => chapter.title), [
    "Chapter 1", // door3: an empty <title/> and no heading
    "The First Door", // door1: its h2
    "Door Two", // door2: its <title>, linear="no" included
  ]);
  assert.equal(book.chapters[0].html, '<p id="top">Before any door.</p>');
  assert.equal(
    book.chapters[1].html,
    "<section><p>Opened <em>slowly</em>.<br /></p><div></div>" +
      // door2.xhtml is chapter 3, written as 3.html; it has no id "x", so the link opens it.
      '<p>Then <a href="3.html">onward</a>.</p></section>',
  );
  assert.equal(book.chapters[2].html, "<p>No heading here.</p>");
});

Deno.test("extractBook() reads an EPUB's title and authors from its package metadata", async () => {
  const book = await extractFrom("doors.epub", zip(bookFiles()));
  assert.equal(book.title, "The Three Doors");
  // The illustrator's role is refined to "ill": not an author.
  assert.equal(book.author, "Ada Writer, Bo Cowriter");
});

Deno.test("extractBook() falls back to the file name for an EPUB without dc:title", async () => {
  const files = bookFiles();
  files["OEBPS/content.opf"] = files["OEBPS/content.opf"]
    .replace(/<dc:title[\s\S]*?<\/dc:title>/, "")
    .replaceAll(/<dc:creator[\s\S]*?<\/dc:creator>/g, "");
  const book = await extractFrom("nameless_book.epub", zip(files));
  assert.equal(book.title, "nameless_book");
  assert.equal(book.author, null);
  assert.equal(book.chapters.length, 3);
});

Deno.test("extractBook() keeps a numeric dc:title as text", async () => {
  const files = bookFiles();
  files["OEBPS/content.opf"] = files["OEBPS/content.opf"]
    .replace(/<dc:title[\s\S]*?<\/dc:title>/, "<dc:title>1984</dc:title>");
  const book = await extractFrom("orwell.epub", zip(files));
  assert.equal(book.title, "1984");
});

Deno.test("extractBook() sanitises an EPUB's chapters", async () => {
  const book = await extractFrom("doors.epub", zip(bookFiles()));
  const all = book.chapters.map((chapter) => chapter.html).join("\n");
  for (const marker of ["stealCookies", "<script", "<style", "onclick", "evil", "class="]) {
    assert.ok(!all.includes(marker), `found ${JSON.stringify(marker)} in ${all}`);
  }
});

Deno.test("extractBook() reports a truncated EPUB as unreadable", async () => {
  const bytes = zip(bookFiles());
  await assertUnreadable(
    bytes.slice(0, Math.floor(bytes.length / 2)),
    "the file is not a valid ZIP archive",
  );
});

Deno.test("extractBook() reports garbage bytes named .epub as unreadable", async () => {
  const garbage = new Uint8Array(4096);
  crypto.getRandomValues(garbage);
  await assertUnreadable(garbage, "the file is not a valid ZIP archive");
});

Deno.test("extractBook() reports an EPUB without META-INF/container.xml as unreadable", async () => {
  const files = bookFiles();
  delete files["META-INF/container.xml"];
  await assertUnreadable(zip(files), '"META-INF/container.xml" is missing');
});

Deno.test("extractBook() reports an EPUB whose package document is missing as unreadable", async () => {
  const files = bookFiles();
  delete files["OEBPS/content.opf"];
  await assertUnreadable(
    zip(files),
    'package document "OEBPS/content.opf" named in "META-INF/container.xml" is missing',
  );
});

Deno.test("extractBook() reports an EPUB with an empty spine as unreadable", async () => {
  const files = bookFiles();
  files["OEBPS/content.opf"] = opf(MANIFEST, "");
  await assertUnreadable(zip(files), "the spine lists no chapters");
});

Deno.test("extractBook() skips an EPUB spine idref missing from the manifest, with a warning", async () => {
  const files = bookFiles();
  files["OEBPS/content.opf"] = opf(MANIFEST, `${SPINE}\n    <itemref idref="door9"/>`);
  const book = await extractFrom("doors.epub", zip(files));
  assert.equal(book.chapters.length, 3);
  assert.deepEqual(book.warnings, [{
    kind: "spine_item_skipped",
    message: 'Spine item "door9" is not in the manifest; it was left out',
  }]);
});

Deno.test("extractBook() skips an EPUB spine item whose file is missing, with a warning", async () => {
  const files = bookFiles();
  delete files["OEBPS/text/door2.xhtml"];
  const book = await extractFrom("doors.epub", zip(files));
  assert.deepEqual(book.chapters.map((chapter) => chapter.title), ["Chapter 1", "The First Door"]);
  assert.deepEqual(book.warnings?.map((warning) => warning.kind), [
    "spine_item_skipped",
    "resource_missing", // door1 links to door2.xhtml#x: the link is removed, its text stays
  ]);
  assert.match(book.chapters[1].html, /<p>Then <a>onward<\/a>\.<\/p>/);
});

Deno.test("extractBook() reads an EPUB chapter that is not UTF-8 in the encoding detected, with a warning", async () => {
  const entries: Zippable = {
    "META-INF/container.xml": strToU8(CONTAINER),
    "OEBPS/content.opf": strToU8(opf(
      '<item id="c" href="c.xhtml" media-type="application/xhtml+xml"/>',
      '<itemref idref="c"/>',
    )),
    // "café" in Windows-1252, undeclared.
    "OEBPS/c.xhtml": new Uint8Array([
      0x3c,
      0x70,
      0x3e,
      0x63,
      0x61,
      0x66,
      0xe9,
      0x3c,
      0x2f,
      0x70,
      0x3e,
    ]),
  };
  const book = await extractFrom("latin.epub", zipSync(entries));
  assert.equal(book.chapters[0].html, "<p>café</p>");
  assert.deepEqual(book.warnings, [{
    kind: "encoding_guessed",
    message: '"OEBPS/c.xhtml": encoding guessed as "windows-1252" (no encoding declared)',
  }]);
});

Deno.test("extractBook() reads an EPUB chapter whose prolog wrongly says UTF-16 as UTF-8", async () => {
  const files = bookFiles();
  // The prolog is readable as ASCII, so the file cannot be UTF-16 (books/decode.ts).
  files["OEBPS/text/door2.xhtml"] = xhtml("<title>Door Two</title>", "<p>Zwei Türen</p>")
    .replace('encoding="utf-8"', 'encoding="UTF-16"');
  const book = await extractFrom("doors.epub", zip(files));
  assert.equal(book.chapters[2].html, "<p>Zwei Türen</p>");
  assert.deepEqual(book.warnings, []);
});

Deno.test("extractBook() skips an EPUB spine item that is binary data, with a warning", async () => {
  const files: Zippable = {};
  for (const [name, content] of Object.entries(bookFiles())) files[name] = strToU8(content);
  // A picture listed as a content document: not text in any encoding.
  files["OEBPS/text/door2.xhtml"] = Uint8Array.from({ length: 4096 }, (_, i) => (i * 7) % 32);
  const book = await extractFrom("doors.epub", zipSync(files));
  assert.deepEqual(book.chapters.map((chapter) => chapter.title), ["Chapter 1", "The First Door"]);
  assert.deepEqual(book.warnings?.[0], {
    kind: "spine_item_skipped",
    message: 'Spine item "OEBPS/text/door2.xhtml" is not text; it was left out',
  });
});

Deno.test("extractBook() reads an EPUB whose markup has elements named like Object properties", async () => {
  const files = bookFiles();
  // Looked up in a plain object, <constructor> found Object's constructor, and the book failed.
  files["OEBPS/text/door2.xhtml"] = xhtml(
    "<title>Door Two</title>",
    "<p>a <constructor>b</constructor> <toString>c</toString> <valueOf>d</valueOf></p>",
  );
  const book = await extractFrom("doors.epub", zip(files));
  assert.equal(book.chapters[2].html, "<p>a b c d</p>");
});

// XML forbids U+0000, but neither parser refuses it; Postgres cannot store it in text.
Deno.test("extractBook() replaces NUL in an EPUB's metadata and chapters with U+FFFD", async () => {
  const files = bookFiles();
  files["OEBPS/content.opf"] = files["OEBPS/content.opf"]
    .replace("The Three", "The\0Three")
    .replace("Ada Writer", "Ada\0Writer &#0;");
  files["OEBPS/text/door2.xhtml"] = xhtml(
    "<title>Door\0Two</title>",
    "<p>No\0heading &#0; here.</p>",
  );
  const book = await extractFrom("nul.epub", zip(files));
  const strings = [
    book.title,
    book.author ?? "",
    ...book.chapters.flatMap((chapter) => [chapter.title, chapter.html]),
  ];
  for (const text of strings) assert.ok(!text.includes("\0"), JSON.stringify(text));
  assert.equal(book.title, "The\uFFFDThree Doors");
  assert.match(book.author ?? "", /^Ada\uFFFDWriter/);
  assert.equal(book.chapters[2].title, "Door\uFFFDTwo");
  assert.match(book.chapters[2].html, /No\uFFFDheading/);
});

Deno.test("extractBook() reports an EPUB chapter nested too deeply as unreadable, naming it", async () => {
  const files = bookFiles();
  files["OEBPS/text/door2.xhtml"] = xhtml("", "<div>".repeat(10_000) + "deep");
  await assertUnreadable(
    zip(files),
    '"OEBPS/text/door2.xhtml" could not be parsed: elements are nested more than "512" deep',
  );
});
