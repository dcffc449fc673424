/**
 * The static site's pages as a reader's browser gets them (site/pages.tsx): `<html lang dir>` from
 * the edition's language and direction for every language kind, a viewport, the SEO description
 * where one exists, a Content-Security-Policy allowing no script, the stylesheet linked from every
 * page, the edition page's table of contents and the chapter pages' previous/next links.
 *
 * @module
 */
import assert from "node:assert/strict";
import { parseDocument } from "htmlparser2";
import { DomUtils } from "htmlparser2";
import type { Element } from "domhandler";
import {
  chapterPage,
  CONTENT_SECURITY_POLICY,
  editionPage,
  type EditionSummary,
  indexPage,
} from "../../site/pages.tsx";

const CHAPTERS = [
  { position: 1, title: "One", html: "<p>First.</p>" },
  { position: 2, title: "Two", html: "<p>Second.</p>" },
  { position: 3, title: "Three", html: "<p>Third.</p>" },
];

/** Every page of an edition of three chapters, parsed. */
async function pagesOf(edition: EditionSummary) {
  const raw = [
    await editionPage(edition, CHAPTERS),
    ...await Promise.all(
      CHAPTERS.map((chapter, i) =>
        chapterPage(edition, chapter, CHAPTERS[i - 1] ?? null, CHAPTERS[i + 1] ?? null)
      ),
    ),
  ];
  return raw.map((html) => ({ html, doc: parseDocument(html) }));
}

function find(doc: ReturnType<typeof parseDocument>, test: (e: Element) => boolean) {
  return DomUtils.findAll(test, doc.children);
}

function meta(doc: ReturnType<typeof parseDocument>, key: string, value: string) {
  return find(doc, (e) => e.name === "meta" && e.attribs[key] === value)[0]?.attribs.content;
}

// [language, stored direction, expected lang, expected dir]
const LANGUAGES: ReadonlyArray<[string | null, "ltr" | "rtl" | null, string, string]> = [
  ["en", "ltr", "en", "ltr"],
  ["fa", null, "fa", "rtl"],
  ["ar-EG", null, "ar-EG", "rtl"],
  ["he", null, "he", "rtl"],
  ["ur", null, "ur", "rtl"],
  ["zh-Hans", null, "zh-Hans", "ltr"],
  ["ru", null, "ru", "ltr"],
  ["ja", "rtl", "ja", "rtl"], // A vertical Japanese book paged right to left says so.
  [null, null, "und", "ltr"],
];

Deno.test("editionPage() and chapterPage() set <html lang dir> from the edition for every kind of language", async () => {
  for (const [language, direction, lang, dir] of LANGUAGES) {
    const pages = await pagesOf({ id: "4", title: "T", author: null, language, direction });
    for (const { doc } of pages) {
      const html = find(doc, (e) => e.name === "html")[0];
      assert.deepEqual(
        { lang: html.attribs.lang, dir: html.attribs.dir },
        { lang, dir },
        `${language}/${direction}`,
      );
    }
  }
});

Deno.test("every page has a viewport, a no-script CSP and the stylesheet; the description where one exists", async () => {
  const described = await pagesOf({
    id: "4",
    title: "T",
    author: "A",
    language: "en",
    description: 'A "short" <summary> of the book.',
  });
  const bare = await pagesOf({ id: "5", title: "T", author: null, language: "en" });
  const index = parseDocument(await indexPage([{ id: "4", title: "T", author: "A" }]));
  for (const { doc } of [...described, ...bare, { doc: index }]) {
    assert.equal(meta(doc, "name", "viewport"), "width=device-width, initial-scale=1");
    const csp = meta(doc, "http-equiv", "Content-Security-Policy");
    assert.equal(csp, CONTENT_SECURITY_POLICY);
    assert.match(csp!, /(^|; )script-src 'none'(;|$)/);
    assert.match(csp!, /(^|; )default-src 'none'(;|$)/);
    assert.equal(find(doc, (e) => e.name === "script").length, 0);
    const sheets = find(doc, (e) => e.name === "link" && e.attribs.rel === "stylesheet");
    assert.equal(sheets.length, 1);
    assert.match(sheets[0].attribs.href, /^(\.\.\/\.\.\/)?site\.css$/);
  }
  for (const { doc } of described) {
    assert.equal(meta(doc, "name", "description"), 'A "short" <summary> of the book.');
  }
  for (const { doc } of bare) assert.equal(meta(doc, "name", "description"), undefined);
});

Deno.test("editionPage() lists every chapter; chapterPage() links to the previous and next", async () => {
  const [edition, first, middle, last] = await pagesOf({ id: "4", title: "T", author: null });
  const toc = find(edition.doc, (e) => e.name === "nav")[0];
  assert.deepEqual(
    DomUtils.findAll((e) => e.name === "a", [toc]).map((
      a,
    ) => [a.attribs.href, DomUtils.textContent(a)]),
    [["1.html", "One"], ["2.html", "Two"], ["3.html", "Three"]],
  );
  const rel = (page: typeof first, name: string) =>
    find(page.doc, (e) => e.name === "a" && e.attribs.rel === name).map((a) => a.attribs.href);
  assert.deepEqual([rel(first, "prev"), rel(first, "next")], [[], ["2.html", "2.html"]]);
  assert.deepEqual([rel(middle, "prev"), rel(middle, "next")], [["1.html", "1.html"], [
    "3.html",
    "3.html",
  ]]);
  assert.deepEqual([rel(last, "prev"), rel(last, "next")], [["2.html", "2.html"], []]);
});

Deno.test("editionPage() shows the book's licence as a note when it states one", async () => {
  const licence =
    "This eBook is for the use of anyone anywhere.\n\nYou may copy it & give it away.";
  const [withLicence] = await pagesOf({ id: "4", title: "T", author: null, licence });
  const note = find(withLicence.doc, (e) => e.name === "details")[0];
  assert.ok(note, "no licence note");
  assert.deepEqual(
    DomUtils.findAll((e) => e.name === "p", [note]).map((p) => DomUtils.textContent(p)),
    ["This eBook is for the use of anyone anywhere.", "You may copy it & give it away."],
  );
  const [without] = await pagesOf({ id: "5", title: "T", author: null });
  assert.equal(find(without.doc, (e) => e.name === "details").length, 0);
});
