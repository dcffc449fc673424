/**
 * Every EPUB case in `tests/fixtures/cases/` (the book fault cases we were handed) as the result
 * it must give, and more books of each case's kind built here, so the kind is fixed and not
 * only the file: navigation titles, creators' roles, archive quirks, what the
 * sanitiser keeps and removes, language and direction.
 *
 * @module
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { zipSync } from "fflate";
import { closeExtractor, extractBook, type ExtractedBook } from "../../books/extract.ts";
import { CONTAINER, packageDocument, PNG, xhtml, zipEpub } from "../_epub.ts";

const CASES = new URL("../fixtures/cases/", import.meta.url).pathname;

async function readCase(name: string): Promise<ExtractedBook> {
  return await extractBook(join(CASES, name), new AbortController().signal);
}

async function readBytes(name: string, bytes: Uint8Array): Promise<ExtractedBook> {
  const dir = await Deno.makeTempDir({ prefix: "epub_cases_test_" });
  try {
    await Deno.writeFile(join(dir, name), bytes);
    return await extractBook(join(dir, name), new AbortController().signal);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

const titles = (book: ExtractedBook): string[] => book.chapters.map((chapter) => chapter.title);

Deno.test("r1: a creator with aut among two refined roles is the author", async () => {
  const book = await readCase("r1-author-two-roles.epub");
  assert.equal(book.author, "Ann Author");
});

Deno.test("r2: ruby, rt and rp stay in the chapter html", async () => {
  const book = await readCase("r2-ruby.epub");
  assert.equal(book.chapters[0].html, "<p><ruby>漢字<rt>かんじ</rt></ruby>です</p>");
});

Deno.test("r3: a JPEG page in the spine becomes an image chapter, written as a resource", async () => {
  const book = await readCase("r3-jpeg-in-spine.epub");
  assert.deepEqual(titles(book), ["One", "Chapter 2"]);
  assert.equal(book.chapters[1].html, '<p><img src="res/1-p.jpg" alt="" /></p>');
  assert.deepEqual(book.resources?.map((r) => [r.path, r.mediaType]), [
    ["res/1-p.jpg", "image/jpeg"],
  ]);
  assert.ok((book.resources?.[0].bytes.length ?? 0) > 0);
});

Deno.test("r4: a non-XHTML spine item is replaced by its manifest fallback", async () => {
  const book = await readCase("r4-json-fallback.epub");
  assert.deepEqual(titles(book), ["Real"]);
  assert.equal(book.chapters[0].html, "<p>fallback text</p>");
});

Deno.test("r5: text inside inline SVG is kept, the SVG sanitised", async () => {
  const book = await readCase("r5-svg-text.epub");
  assert.match(book.chapters[0].html, /^<svg [^>]*viewbox="0 0 100 20"/);
  assert.match(book.chapters[0].html, /<text x="0" y="10">The lantern swung in the wind\.<\/text>/);
});

Deno.test("r6: MathML is kept, not flattened", async () => {
  const book = await readCase("r6-mathml.epub");
  assert.match(
    book.chapters[0].html,
    /<math[^>]*><msup><mrow><mo>\(<\/mo><mi>a<\/mi><mo>\+<\/mo><mi>b<\/mi><mo>\)<\/mo><\/mrow><mn>2<\/mn><\/msup><\/math>/,
  );
});

Deno.test("r7: links go to the written chapter files with their fragments, ids stay", async () => {
  const book = await readCase("r7-links-ids.epub");
  assert.equal(
    book.chapters[0].html,
    '<p>See<a href="2.html#n1" id="r1">1</a> <img src="res/1-a.png" alt="pic" /></p>',
  );
  assert.equal(book.chapters[1].html, '<p id="n1">note <a href="1.html#r1">back</a></p>');
  assert.deepEqual(book.resources?.map((r) => r.path), ["res/1-a.png"]);
});

Deno.test("h16: a JPEG spine item with an XHTML fallback shows the fallback page", async () => {
  const book = await readCase("h16_spine_image.epub");
  assert.deepEqual(titles(book), ["Cover", "One", "Two"]);
  assert.equal(book.chapters[0].html, "<p>cover page</p>");
});

Deno.test("h16b: an SVG document in the spine is an image page, never a blank chapter", async () => {
  const book = await readCase("h16b_spine_svg.epub");
  assert.deepEqual(titles(book), ["Cover art", "One"]);
  assert.match(book.chapters[0].html, /^<svg [^>]*>.*<text x="1" y="5">COVER<\/text><\/svg>$/);
});

Deno.test("h18: a chapter in UTF-16, declared in its XML prolog, is decoded", async () => {
  const book = await readCase("h18_utf16_chapter.epub");
  assert.deepEqual(titles(book), ["One", "Two"]);
  assert.equal(book.chapters[1].html, "<p>Zweites Kapitel über München</p>");
  assert.deepEqual(book.warnings, []);
});

Deno.test("h19b: an href in decomposed Unicode finds the composed entry name", async () => {
  const book = await readCase("h19b_nfd_href.epub");
  assert.deepEqual(titles(book), ["Unu"]);
  assert.equal(book.chapters[0].html, "<p>primul capitol</p>");
});

Deno.test("h20: entry names written with backslashes are read", async () => {
  const book = await readCase("h20_backslash.epub");
  assert.equal(book.title, "Test Book");
  assert.deepEqual(titles(book), ["One"]);
});

// --- More of each kind ---

const NAV_MANIFEST =
  '<item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>' +
  '<item id="c1" href="text/c1.xhtml" media-type="application/xhtml+xml"/>' +
  '<item id="c2" href="text/c2.xhtml" media-type="application/xhtml+xml"/>' +
  '<item id="c3" href="text/c3.xhtml" media-type="application/xhtml+xml"/>';
const NAV_SPINE = '<itemref idref="c1"/><itemref idref="c2"/><itemref idref="c3"/>';

Deno.test("extractBook() titles EPUB chapters from the nav document before their headings", async () => {
  const book = await readBytes(
    "nav.epub",
    zipEpub({
      "META-INF/container.xml": CONTAINER,
      "OEBPS/content.opf": packageDocument({ manifest: NAV_MANIFEST, spine: NAV_SPINE }),
      "OEBPS/nav.xhtml": xhtml(
        "Contents",
        '<nav epub:type="landmarks"><a href="text/c2.xhtml">Wrong</a></nav>' +
          '<nav epub:type="toc"><ol><li><a href="text/c1.xhtml#start">I: Loomings</a></li>' +
          '<li><a href="text/c2.xhtml">II:   The Carpet-Bag</a></li></ol></nav>',
      ),
      "OEBPS/text/c1.xhtml": xhtml("Test Book", '<h1 id="start">I</h1><p>Call me Ishmael.</p>'),
      "OEBPS/text/c2.xhtml": xhtml(
        "Test Book",
        "<hgroup><h2>II</h2><p>The Carpet-Bag</p></hgroup><p>I stuffed a shirt or two.</p>",
      ),
      // Not in the nav: its hgroup, then (never) the <title> that repeats the book title.
      "OEBPS/text/c3.xhtml": xhtml(
        "Test Book",
        "<hgroup><h3>III</h3><h4>The Spouter-Inn</h4></hgroup><p>Entering that gable-ended inn.</p>",
      ),
    }),
  );
  assert.deepEqual(titles(book), ["I: Loomings", "II: The Carpet-Bag", "III: The Spouter-Inn"]);
  // The heading "I" differs from the label, so the reader still sees it; its id stays.
  assert.equal(book.chapters[0].html, '<h1 id="start">I</h1><p>Call me Ishmael.</p>');
  // The hgroup says what the label says: it is the title, not repeated in the body.
  assert.equal(book.chapters[1].html, "<p>I stuffed a shirt or two.</p>");
});

Deno.test("extractBook() titles EPUB 2 chapters from the NCX, never the book title repeated", async () => {
  const ncx =
    `<?xml version="1.0"?><ncx xmlns="http://www.daisy.org/z3986/2005/ncx/" version="2005-1">
<navMap><navPoint id="p1"><navLabel><text>Part One</text></navLabel><content src="text/c1.xhtml"/>
<navPoint id="p2"><navLabel><text>Chapter  Two</text></navLabel><content src="text/c2.xhtml#x"/></navPoint>
</navPoint></navMap></ncx>`;
  const book = await readBytes(
    "ncx.epub",
    zipEpub({
      "META-INF/container.xml": CONTAINER,
      "OEBPS/content.opf": packageDocument({
        metadata: '<dc:title>Fixed Book</dc:title><meta property="rendition:layout">' +
          "pre-paginated</meta>",
        manifest: NAV_MANIFEST.replace(/<item id="nav"[^>]*>/, "") +
          '<item id="ncx" href="toc.ncx" media-type="application/x-dtbncx+xml"/>',
        spine: NAV_SPINE,
        spineAttributes: ' toc="ncx"',
      }),
      "OEBPS/toc.ncx": ncx,
      "OEBPS/text/c1.xhtml": xhtml("Fixed Book", "<p>one</p>"),
      "OEBPS/text/c2.xhtml": xhtml("Fixed Book", "<p>two</p>"),
      "OEBPS/text/c3.xhtml": xhtml("Fixed Book", "<p>three</p>"),
    }),
  );
  assert.deepEqual(titles(book), ["Part One", "Chapter Two", "Page 3"]);
});

Deno.test("extractBook() titles an untitled page showing only the cover image 'Cover'", async () => {
  const book = (metadata: string, coverItem: string, spine: string): Uint8Array =>
    zipEpub({
      "META-INF/container.xml": CONTAINER,
      "OEBPS/content.opf": packageDocument({
        metadata: `<dc:title>Test Book</dc:title>${metadata}`,
        manifest: coverItem +
          '<item id="page" href="cover.xhtml" media-type="application/xhtml+xml"/>' +
          '<item id="plate" href="plate.png" media-type="image/png"/>' +
          '<item id="c1" href="c1.xhtml" media-type="application/xhtml+xml"/>',
        spine,
      }),
      "OEBPS/cover.png": PNG,
      "OEBPS/plate.png": PNG,
      // Its <title> is the book's, as on most cover pages: never a chapter title.
      "OEBPS/cover.xhtml": xhtml("Test Book", '<div><img src="cover.png" alt="Cover"/></div>'),
      "OEBPS/c1.xhtml": xhtml("Test Book", '<p>Text.</p><img src="plate.png" alt="A plate"/>'),
    });
  const epub3 = await readBytes(
    "cover3.epub",
    book(
      "",
      '<item id="img" href="cover.png" media-type="image/png" properties="cover-image"/>',
      '<itemref idref="page"/><itemref idref="c1"/><itemref idref="plate"/>',
    ),
  );
  // A page with text, and an image page that is not the cover, keep their "Chapter N".
  assert.deepEqual(titles(epub3), ["Cover", "Chapter 2", "Chapter 3"]);
  const epub2 = await readBytes(
    "cover2.epub",
    book(
      '<meta name="cover" content="img"/>',
      '<item id="img" href="cover.png" media-type="image/png"/>',
      '<itemref idref="img"/><itemref idref="c1"/>',
    ),
  );
  // EPUB 2 names its cover image in <meta name="cover">: here the image itself is in the spine.
  assert.deepEqual(titles(epub2), ["Cover", "Chapter 2"]);
});

Deno.test("extractBook() reads EPUB creators by role: aut or none is an author", async () => {
  const book = await readBytes(
    "roles.epub",
    zipEpub({
      "META-INF/container.xml": CONTAINER,
      "OEBPS/content.opf": packageDocument({
        metadata: "<dc:title>T</dc:title>" +
          '<dc:creator opf:role="aut">Ada Two</dc:creator>' +
          '<dc:creator opf:role="edt">Ed Itor</dc:creator>' +
          '<dc:creator id="x">Xu Both</dc:creator>' +
          '<meta refines="#x" property="role">trl</meta><meta refines="#x" property="role">aut</meta>' +
          '<dc:creator id="y">Yan Ill</dc:creator><meta refines="#y" property="role">ill</meta>' +
          "<dc:creator>No Role</dc:creator>",
        manifest: '<item id="c1" href="c1.xhtml" media-type="application/xhtml+xml"/>',
        spine: '<itemref idref="c1"/>',
      }),
      "OEBPS/c1.xhtml": xhtml("x", "<p>x</p>"),
    }),
  );
  assert.equal(book.author, "Ada Two, Xu Both, No Role");
});

/** Clear the UTF-8 flag (general-purpose bit 11) of every entry, as old zippers wrote them. */
function clearUtf8Flags(bytes: Uint8Array): Uint8Array {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let i = 0; i + 4 <= bytes.length; i++) {
    const signature = view.getUint32(i, true);
    const at = signature === 0x04034b50 ? i + 6 : signature === 0x02014b50 ? i + 8 : -1;
    if (at !== -1) view.setUint16(at, view.getUint16(at, true) & ~0x0800, true);
  }
  return bytes;
}

Deno.test("extractBook() reads UTF-8 entry names zipped without the UTF-8 flag", async () => {
  const encoder = new TextEncoder();
  const bytes = clearUtf8Flags(zipSync({
    mimetype: encoder.encode("application/epub+zip"),
    "META-INF/container.xml": encoder.encode(CONTAINER),
    "OEBPS/content.opf": encoder.encode(packageDocument({
      manifest: '<item id="c" href="%C3%AEnceput.xhtml" media-type="application/xhtml+xml"/>',
      spine: '<itemref idref="c"/>',
    })),
    "OEBPS/început.xhtml": encoder.encode(xhtml("x", "<h1>Început</h1><p>text</p>")),
  }));
  const book = await readBytes("flagless.epub", bytes);
  assert.deepEqual(titles(book), ["Început"]);
});

Deno.test("extractBook() leaves out a blank or unshowable spine item with a warning", async () => {
  const book = await readBytes(
    "blank.epub",
    zipEpub({
      "META-INF/container.xml": CONTAINER,
      "OEBPS/content.opf": packageDocument({
        manifest: '<item id="c1" href="c1.xhtml" media-type="application/xhtml+xml"/>' +
          '<item id="b" href="blank.xhtml" media-type="application/xhtml+xml"/>' +
          '<item id="p" href="a.pdf" media-type="application/pdf"/>',
        spine: '<itemref idref="b"/><itemref idref="p"/><itemref idref="c1"/>',
      }),
      "OEBPS/blank.xhtml": xhtml("Blank", '<div id="top"> <script>x()</script></div>'),
      "OEBPS/a.pdf": "%PDF-1.4",
      "OEBPS/c1.xhtml": xhtml("x", '<h1>One</h1><p><a href="blank.xhtml#top">start</a></p>'),
    }),
  );
  assert.deepEqual(titles(book), ["One"]);
  // The link to the skipped page goes on to the chapter after it: here, itself.
  assert.equal(book.chapters[0].html, '<p><a href="1.html">start</a></p>');
  assert.deepEqual(book.warnings, [
    {
      kind: "spine_item_skipped",
      message: 'Spine item "a.pdf" (application/pdf) cannot be shown; it was left out',
    },
    {
      kind: "spine_item_skipped",
      message: 'Spine item "OEBPS/blank.xhtml" shows nothing; it was left out',
    },
  ]);
});

Deno.test("extractBook() removes links and images whose target is not in the EPUB, with warnings", async () => {
  const book = await readBytes(
    "missing.epub",
    zipEpub({
      "META-INF/container.xml": CONTAINER,
      "OEBPS/content.opf": packageDocument({
        manifest: '<item id="c1" href="c1.xhtml" media-type="application/xhtml+xml"/>' +
          '<item id="i" href="img/ok.png" media-type="image/png"/>',
        spine: '<itemref idref="c1"/>',
      }),
      "OEBPS/img/ok.png": PNG,
      "OEBPS/c1.xhtml": xhtml(
        "x",
        '<h1>One</h1><p><img src="img/gone.png" alt="A map"/><img src="./img/ok.png" alt=""/>' +
          '<a href="gone.xhtml">away</a> <a href="https://example.org/">web</a>' +
          ' <a href="#nowhere">here</a> <a href="javascript:alert(1)">js</a></p>',
      ),
    }),
  );
  assert.equal(
    book.chapters[0].html,
    '<p>A map<img src="res/1-ok.png" alt="" /><a>away</a> <a href="https://example.org/">web</a>' +
      ' <a href="1.html">here</a> <a>js</a></p>',
  );
  assert.deepEqual(book.warnings?.map((warning) => warning.message), [
    'Image "OEBPS/img/gone.png" is not in the book',
    'Link target "OEBPS/gone.xhtml" is not in the book; the link was removed',
  ]);
  assert.deepEqual(book.resources?.[0].bytes, PNG);
});

Deno.test("extractBook() stores an EPUB's language and page-progression direction", async () => {
  const book = (language: string, spineAttributes = ""): Uint8Array =>
    zipEpub({
      "META-INF/container.xml": CONTAINER,
      "OEBPS/content.opf": packageDocument({
        metadata: `<dc:title>T</dc:title><dc:language>${language}</dc:language>`,
        manifest: '<item id="c1" href="c1.xhtml" media-type="application/xhtml+xml"/>',
        spine: '<itemref idref="c1"/>',
        spineAttributes,
      }),
      "OEBPS/c1.xhtml": xhtml("x", "<p>x</p>", ' xml:lang="en" dir="ltr"'),
    });
  const hebrew = await readBytes("he.epub", book("he"));
  assert.deepEqual([hebrew.language, hebrew.direction], ["he", "rtl"]);
  // The chapter says it is English, left to right, inside a Hebrew book: that stays with it.
  assert.equal(hebrew.chapters[0].html, '<div lang="en" dir="ltr"><p>x</p></div>');
  const japanese = await readBytes("ja.epub", book("ja", ' page-progression-direction="rtl"'));
  assert.deepEqual([japanese.language, japanese.direction], ["ja", "rtl"]);
  const english = await readBytes("en.epub", book("en-GB"));
  assert.deepEqual([english.language, english.direction], ["en-GB", "ltr"]);
});

Deno.test("extractBook() keeps SVG and MathML but not their scripts, handlers or javascript: URLs", async () => {
  const book = await readBytes(
    "svg.epub",
    zipEpub({
      "META-INF/container.xml": CONTAINER,
      "OEBPS/content.opf": packageDocument({
        manifest: '<item id="c1" href="c1.xhtml" media-type="application/xhtml+xml"/>' +
          '<item id="s" href="s.svg" media-type="image/svg+xml"/>',
        spine: '<itemref idref="c1"/>',
      }),
      "OEBPS/s.svg": '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 1 1" onload="evil()">' +
        '<script>evil()</script><linearGradient id="g"/><text>plate</text></svg>',
      "OEBPS/c1.xhtml": xhtml(
        "x",
        '<h1>One</h1><svg xmlns="http://www.w3.org/2000/svg" onload="evil()"><script>evil()</script>' +
          '<a xlink:href="javascript:evil()"><text onclick="evil()">Label</text></a>' +
          '<animate attributeName="href" to="javascript:evil()"/><foreignObject><p>fo</p></foreignObject>' +
          '</svg><math><mi onmouseover="evil()">x</mi><annotation-xml><p>hidden</p></annotation-xml></math>' +
          '<img src="s.svg" alt="plate"/>',
      ),
    }),
  );
  const html = book.chapters[0].html;
  for (
    const marker of ["evil", "<script", "javascript:", "onload", "onclick", "<animate", "hidden"]
  ) {
    assert.ok(!html.includes(marker), `found ${JSON.stringify(marker)} in ${html}`);
  }
  assert.match(html, /<text>Label<\/text>/);
  assert.match(html, /<math><mi>x<\/mi><\/math>/);
  const svg = new TextDecoder().decode(book.resources?.[0].bytes);
  assert.ok(!svg.includes("evil"), svg);
  // A standalone SVG file is XML: its names keep their case.
  assert.match(
    svg,
    /<svg xmlns="http:\/\/www.w3.org\/2000\/svg" viewBox="0 0 1 1"><linearGradient id="g"/,
  );
});

Deno.test("r25: NCX labels have their character references and entities decoded", async () => {
  const book = await readCase("r25-ncx-entities.epub");
  assert.deepEqual(titles(book), ["Juliet's Balcony", "Salt & Pepper", "Café"]);
});

Deno.test("kind of r25: every way XML writes a character reads the same, in NCX labels and the package's metadata", async () => {
  // Each way of writing "Café l'Été & co" (decimal, hex, named XML and HTML entities, white
  // space) gives the same title, label and creator.
  const spellings = [
    "Café l'Été &amp; co",
    "Caf&#233; l&#39;&#201;t&#233; &#38; co",
    "Caf&#xE9; l&#x27;&#xC9;t&#xe9; &#x26; co",
    "Caf&eacute; l&apos;&Eacute;t&eacute; &amp; co",
    "  Café\n   l'Été\t&amp;  co ",
  ];
  for (const spelling of spellings) {
    const ncx = '<?xml version="1.0"?><ncx xmlns="http://www.daisy.org/z3986/2005/ncx/" ' +
      `version="2005-1"><navMap><navPoint id="p1"><navLabel><text>${spelling}</text></navLabel>` +
      '<content src="c1.xhtml"/></navPoint></navMap></ncx>';
    const book = await readBytes(
      "entities.epub",
      zipEpub({
        "META-INF/container.xml": CONTAINER,
        "OEBPS/content.opf": packageDocument({
          metadata: `<dc:title>${spelling}</dc:title><dc:creator>${spelling}</dc:creator>`,
          manifest: '<item id="c1" href="c1.xhtml" media-type="application/xhtml+xml"/>' +
            '<item id="ncx" href="toc.ncx" media-type="application/x-dtbncx+xml"/>',
          spine: '<itemref idref="c1"/>',
          spineAttributes: ' toc="ncx"',
        }).replace('version="3.0"', 'version="2.0"'),
        "OEBPS/toc.ncx": ncx,
        "OEBPS/c1.xhtml": xhtml("c", "<p>Text.</p>"),
      }),
    );
    assert.deepEqual(
      { title: book.title, author: book.author, chapters: titles(book) },
      { title: "Café l'Été & co", author: "Café l'Été & co", chapters: ["Café l'Été & co"] },
      spelling,
    );
  }
});

Deno.test("r26: a page that shows only its heading is a chapter, in spine order", async () => {
  const book = await readCase("r26-part-title-pages.epub");
  assert.deepEqual(titles(book), [
    "Part One",
    "1. The Ferry",
    "2. The Island",
    "Part Two",
    "3. The Storm",
    "4. The Return",
  ]);
  assert.equal(book.chapters[0].html, "<h1>Part One</h1>");
  assert.deepEqual(book.warnings, []);
});

Deno.test("kind of r26: a heading-only or image-only page is a chapter; a page with nothing is not", async () => {
  const pages: [string, string, string | null][] = [
    ['<h1 id="p1">Part One</h1>', "Part One", '<h1 id="p1">Part One</h1>'],
    ["<section><h2>Book II</h2></section>", "Book II", "<section><h2>Book II</h2></section>"],
    ["<hgroup><h1>Part</h1><p>The Sea</p></hgroup>", "Part: The Sea", null],
    ['<p><img src="a.png" alt="A map"/></p>', "Chapter 1", null],
    ["<div> </div>", "", null],
  ];
  for (const [body, title, html] of pages) {
    const book = await readBytes(
      "pages.epub",
      zipEpub({
        "META-INF/container.xml": CONTAINER,
        "OEBPS/content.opf": packageDocument({
          manifest: '<item id="p" href="p.xhtml" media-type="application/xhtml+xml"/>' +
            '<item id="c" href="c.xhtml" media-type="application/xhtml+xml"/>' +
            '<item id="img" href="a.png" media-type="image/png"/>',
          spine: '<itemref idref="p"/><itemref idref="c"/>',
        }),
        "OEBPS/p.xhtml": xhtml("Test Book", body),
        "OEBPS/c.xhtml": xhtml("x", "<h1>Next</h1><p>Text.</p>"),
        "OEBPS/a.png": PNG,
      }),
    );
    const shown = title === "" ? ["Next"] : [title, "Next"];
    assert.deepEqual(titles(book), shown, body);
    if (html !== null) assert.equal(book.chapters[0].html, html, body);
    const skipped = (book.warnings ?? []).filter((w) => w.kind === "spine_item_skipped");
    assert.equal(skipped.length, title === "" ? 1 : 0, body);
  }
});

Deno.test("extractBook() keeps an EPUB's dc:rights as the edition's licence, not a chapter", async () => {
  const book = await readBytes(
    "rights.epub",
    zipEpub({
      "META-INF/container.xml": CONTAINER,
      "OEBPS/content.opf": packageDocument({
        metadata: "<dc:title>R</dc:title><dc:rights>Public domain in the USA.</dc:rights>",
        manifest: '<item id="c" href="c.xhtml" media-type="application/xhtml+xml"/>',
        spine: '<itemref idref="c"/>',
      }),
      "OEBPS/c.xhtml": xhtml("x", "<h1>One</h1><p>Text.</p>"),
    }),
  );
  assert.equal(book.licence, "Public domain in the USA.");
  const none = await readCase("r25-ncx-entities.epub");
  assert.equal(none.licence, null);
});

Deno.test("closeExtractor() after the EPUB cases", () => {
  closeExtractor();
});
