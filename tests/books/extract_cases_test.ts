/**
 * The plain-text, HTML and Markdown cases in `tests/fixtures/cases/` (the book fault cases we
 * were handed), each with its expected result, and beside each a book built here of the
 * same kind, so the kind is fixed and not only the file: encodings declared and undeclared,
 * wrapped headings, contents lists, the Gutenberg frame, bylines, the heading level that divides
 * an HTML or Markdown book.
 *
 * @module
 */
import assert from "node:assert/strict";
import { type ExtractedBook, UnreadableBookError } from "../../books/extract.ts";
import { brokenLinks } from "../../bench/_book_links.ts";
import { extractCase, extractFrom, titles } from "../_books.ts";

const CASES = new URL("../fixtures/cases/", import.meta.url);

function guessed(book: ExtractedBook): string[] {
  return (book.warnings ?? []).filter((warning) => warning.kind === "encoding_guessed")
    .map((warning) => warning.message);
}

Deno.test("r9: a chapter heading that wraps onto a second line keeps its whole title", async () => {
  const book = await extractCase("r9-wrapped-heading.txt");
  assert.equal(book.title, "Book");
  assert.equal(book.author, "A B");
  assert.deepEqual(book.chapters, [
    { title: "CHAPTER 1. A long title that wraps onto a second line.", html: "<p>Body one.</p>" },
    { title: "CHAPTER 2. Short.", html: "<p>Body two.</p>" },
  ]);
});

Deno.test("kind of r9: a title on the line under 'CHAPTER I.' or a bare numeral is the title", async () => {
  const book = await extractFrom(
    "alice.txt",
    "CHAPTER I.\nDown the Rabbit-Hole\n\nAlice was tired.\n\nCHAPTER II.\nThe Pool of Tears\n\n" +
      "Curiouser.\n",
  );
  assert.deepEqual(titles(book), [
    "CHAPTER I. Down the Rabbit-Hole",
    "CHAPTER II. The Pool of Tears",
  ]);
  const worlds = await extractFrom(
    "worlds.txt",
    "BOOK ONE\nTHE COMING OF THE MARTIANS\n\nI.\nTHE EVE OF THE WAR.\n\nNo one would have believed.\n\n" +
      "II.\nTHE FALLING STAR.\n\nThen came the night.\n\nBOOK TWO\nTHE EARTH UNDER THE MARTIANS\n\n" +
      "I.\nUNDER FOOT.\n\nIn the first book.\n",
  );
  // The BOOK headings have nothing under them before their first chapter: no chapter of their own.
  assert.deepEqual(titles(worlds), [
    "I. THE EVE OF THE WAR.",
    "II. THE FALLING STAR.",
    "I. UNDER FOOT.",
  ]);
});

Deno.test("r10: a contents list is no chapter; preface and epilogue are", async () => {
  const book = await extractCase("r10-toc-then-epilogue.txt");
  assert.equal(book.title, "Book");
  assert.deepEqual(book.chapters, [
    { title: "PREFACE", html: "<p>Preface text.</p>" },
    { title: "CHAPTER 1. First.", html: "<p>Body one.</p>" },
    { title: "CHAPTER 2. Last.", html: "<p>Body two.</p>" },
    { title: "Epilogue", html: "<p>After words.</p>" },
  ]);
});

Deno.test("kind of r10: headings named only by the book's contents list are chapters", async () => {
  const book = await extractFrom(
    "jekyll.txt",
    "Contents\n\n STORY OF THE DOOR\n\n SEARCH FOR MR. HYDE\n\n THE LAST NIGHT\n\n\n" +
      "STORY OF THE DOOR\n\nMr. Utterson the lawyer.\n\nSEARCH FOR MR. HYDE\n\nThat evening.\n\n" +
      "THE LAST NIGHT\n\nMr. Utterson was sitting.\n",
  );
  assert.deepEqual(titles(book), ["STORY OF THE DOOR", "SEARCH FOR MR. HYDE", "THE LAST NIGHT"]);
  assert.equal(book.chapters[0].html, "<p>Mr. Utterson the lawyer.</p>");
});

Deno.test("r11: HTML in ISO-8859-1 declared by <meta> is decoded as declared", async () => {
  const book = await extractCase("r11-latin1.htm");
  assert.deepEqual(book.chapters, [{ title: "Capítulo I", html: "<p>Año</p>" }]);
  // Declared, not guessed: no warning.
  assert.deepEqual(guessed(book), []);
});

Deno.test("kind of r11: <meta charset>, an XML prolog and a Windows-1251 guess decode Глава", async () => {
  const cyrillic = (text: string): Uint8Array =>
    Uint8Array.from(text, (char) => {
      const code = char.codePointAt(0) as number;
      // Windows-1251 puts А…я (U+0410…U+044F) at 0xC0…0xFF, and ё at 0xB8.
      if (code === 0x451) return 0xb8;
      return code >= 0x410 && code <= 0x44f ? code - 0x410 + 0xc0 : code;
    });
  const meta = await extractFrom(
    "meta.html",
    cyrillic('<meta charset="windows-1251"><h2>Глава 1</h2><p>Текст</p><h2>Глава 2</h2><p>Ещё</p>'),
  );
  assert.deepEqual(titles(meta), ["Глава 1", "Глава 2"]);
  const prolog = await extractFrom(
    "prolog.xhtml",
    cyrillic(
      '<?xml version="1.0" encoding="windows-1251"?><html><body><p>Привет</p></body></html>',
    ),
  );
  assert.match(prolog.chapters[0].html, /Привет/);
  const text = "Глава первая\n\nОн вошёл в комнату и сел у окна. Было тихо и темно.\n\n" +
    "Глава вторая\n\nУтром она пришла снова, и они долго говорили о прошлом.\n";
  const undeclared = await extractFrom("roman.txt", cyrillic(text.repeat(20)));
  assert.equal(undeclared.chapters[0].title, "Глава первая");
  assert.match(undeclared.chapters[0].html, /Он вошёл в комнату/);
  assert.equal(guessed(undeclared).length, 1, JSON.stringify(undeclared.warnings));
});

Deno.test("kind of r11: a Windows-1251 guess is read where the non-ASCII text is, past an ASCII preamble", async () => {
  const cyrillic = (text: string): Uint8Array =>
    Uint8Array.from(text, (char) => {
      const code = char.codePointAt(0) as number;
      if (code === 0x451) return 0xb8;
      return code >= 0x410 && code <= 0x44f ? code - 0x410 + 0xc0 : code;
    });
  // More than 64 KiB of English before the first Russian line: a sample from the start of the
  // file holds no Cyrillic byte at all, and was guessed Windows-1252.
  const preamble = "This eBook is for the use of anyone anywhere at no cost and with almost no " +
    "restrictions whatsoever.\n\n";
  const text = "Глава первая\n\nОн вошёл в комнату и сел у окна. Было тихо и темно.\n\n" +
    "Глава вторая\n\nУтром она пришла снова, и они долго говорили о прошлом.\n\n";
  const bytes = cyrillic(`Roman\n\n${preamble.repeat(700)}${text.repeat(20)}`);
  assert.ok(bytes.findIndex((byte) => byte >= 0x80) > 64 * 1024);
  const book = await extractFrom("roman.txt", bytes);
  assert.deepEqual(guessed(book), ['encoding guessed as "windows-1251" (no encoding declared)']);
  assert.equal(book.chapters[1].title, "Глава первая");
});

Deno.test("kind of r11: bytes the declared encoding cannot read are read as UTF-8, with a warning", async () => {
  // "café" in UTF-8 under a <meta> saying ISO-8859-6, in which 0xA9 means nothing.
  const book = await extractFrom(
    "cafe.html",
    '<meta charset="iso-8859-6"><h2>One</h2><p>café</p><h2>Two</h2><p>thé</p>',
  );
  assert.deepEqual(titles(book), ["One", "Two"]);
  assert.equal(book.chapters[0].html, "<p>café</p>");
  assert.deepEqual(guessed(book), [
    'encoding guessed as "utf-8" (declared encoding "iso-8859-6" does not match the bytes)',
  ]);
});

Deno.test("r12: '<title>X, by Y' and a 'By Y' heading give title and author; no byline chapter", async () => {
  const book = await extractCase("r12-byline-h2.html");
  assert.equal(book.title, "Moby");
  assert.equal(book.author, "Herman M");
  assert.deepEqual(book.chapters, [{ title: "Chapter 1", html: "<p>Call me.</p>" }]);
});

Deno.test("kind of r12: HTML chapters in h3 under h2 volumes split at h3", async () => {
  const book = await extractFrom(
    "volumes.html",
    "<title>Two Volumes</title><h1>Two Volumes</h1><h2>By Ann Author</h2><h2>VOLUME I</h2>" +
      "<h3>CHAPTER I</h3><p>One.</p><h3>CHAPTER II</h3><p>Two.</p><h2>VOLUME II</h2>" +
      "<h3>CHAPTER I</h3><p>Three.</p><h3>CHAPTER II</h3><p>Four.</p>",
  );
  assert.equal(book.author, "Ann Author");
  assert.deepEqual(titles(book), ["CHAPTER I", "CHAPTER II", "CHAPTER I", "CHAPTER II"]);
  const markdown = await extractFrom(
    "volumes.md",
    "# Two Volumes\n\n## By Ann Author\n\n## Part One\n\n### Chapter 1\n\nOne.\n\n" +
      "### Chapter 2\n\nTwo.\n\n## Part Two\n\n### Chapter 3\n\nThree.\n",
  );
  assert.equal(markdown.title, "Two Volumes");
  assert.equal(markdown.author, "Ann Author");
  assert.deepEqual(titles(markdown), ["Chapter 1", "Chapter 2", "Chapter 3"]);
});

Deno.test("r14: only the text between the Gutenberg markers is the book", async () => {
  const book = await extractCase("r14-gutenberg-frame.txt");
  assert.equal(book.title, "Book");
  assert.equal(book.author, "A");
  assert.deepEqual(book.chapters, [{ title: "CHAPTER 1", html: "<p>Body.</p>" }]);
});

Deno.test("kind of r14: a Gutenberg HTML frame and its header's title and author", async () => {
  const book = await extractFrom(
    "framed.html",
    "<html><head><title>The Project Gutenberg eBook of Walden, by Henry Thoreau</title></head>" +
      '<body><section class="pg-boilerplate pgheader" id="pg-header"><p>Title: Walden</p>' +
      "<p>Author: Henry David Thoreau</p></section><p>*** START OF THE PROJECT GUTENBERG EBOOK " +
      "WALDEN ***</p><h2>ECONOMY</h2><p>When I wrote.</p><h2>READING</h2><p>With a little.</p>" +
      "<p>*** END OF THE PROJECT GUTENBERG EBOOK WALDEN ***</p><p>Section 1. General Terms of " +
      "Use and Redistributing Project Gutenberg electronic works</p></body></html>",
  );
  assert.equal(book.title, "Walden");
  assert.equal(book.author, "Henry David Thoreau");
  assert.deepEqual(book.chapters, [
    { title: "ECONOMY", html: "<p>When I wrote.</p>" },
    { title: "READING", html: "<p>With a little.</p>" },
  ]);
});

Deno.test("h17: Windows-1252 text is decoded with its curly quotes and umlauts, as a guess", async () => {
  const book = await extractCase("h17_cp1252.txt");
  assert.equal(book.title, "Café Stories");
  assert.deepEqual(book.chapters, [
    { title: "CHAPTER I", html: "<p>It was “quoted” in München.</p>" },
  ]);
  assert.deepEqual(guessed(book), ['encoding guessed as "windows-1252" (no encoding declared)']);
});

Deno.test("h17: UTF-16LE text and HTML with a byte-order mark are decoded", async () => {
  const text = await extractCase("h17_utf16le_bom.txt");
  assert.equal(text.title, "Café Stories");
  assert.equal(text.author, "Jane Doe");
  assert.deepEqual(text.chapters, [
    { title: "CHAPTER I", html: "<p>It was a cold day in München.</p>" },
  ]);
  const html = await extractCase("h17_utf16le_bom.html");
  assert.equal(html.title, "Café");
  assert.deepEqual(html.chapters, [{ title: "One", html: "<p>Hello München</p>" }]);
  assert.deepEqual([...guessed(text), ...guessed(html)], []);
});

Deno.test("kind of h17: UTF-16 without a byte-order mark is detected; binary data is refused", async () => {
  const utf16 = (text: string, littleEndian: boolean): Uint8Array => {
    const bytes = new Uint8Array(text.length * 2);
    const view = new DataView(bytes.buffer);
    for (let index = 0; index < text.length; index += 1) {
      view.setUint16(index * 2, text.charCodeAt(index), littleEndian);
    }
    return bytes;
  };
  const story = "Chapter 1\n\nIt was a cold day in München.\n";
  for (const littleEndian of [true, false]) {
    const book = await extractFrom("wide.txt", utf16(story, littleEndian));
    assert.deepEqual(book.chapters, [
      { title: "Chapter 1", html: "<p>It was a cold day in München.</p>" },
    ]);
    assert.equal(guessed(book).length, 1);
  }
  // A PNG header and random-looking bytes: binary, refused as such.
  const png = new Uint8Array(4096).map((_, index) => (index * 7919) % 251);
  png.set([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  await assert.rejects(extractFrom("image.txt", png), (error: unknown) => {
    assert.ok(error instanceof UnreadableBookError, String(error));
    assert.match(error.message, /binary data, not text$/);
    return true;
  });
});

Deno.test("h22: a single-spaced contents list inside the Gutenberg frame is no chapter", async () => {
  const book = await extractCase("h22_gutenberg_toc.txt");
  assert.equal(book.title, "The Little Test Book");
  assert.equal(book.author, "Jane Doe");
  assert.deepEqual(book.chapters, [
    { title: "CHAPTER I. The Beginning", html: "<p>It began on a Monday.</p>" },
    { title: "CHAPTER II. The Middle", html: "<p>Things went on.</p>" },
    { title: "CHAPTER III. The End", html: "<p>And then it stopped.</p>" },
  ]);
});

Deno.test("kind of h22: STAVE, Capítulo, Chapitre, Kapitel and bare numerals are chapter levels", async () => {
  const cases: [string, string[]][] = [
    ["STAVE I:  MARLEY'S GHOST", ["STAVE I: MARLEY'S GHOST", "STAVE II: THE FIRST SPIRIT"]],
    ["Capítulo primero. Que trata", ["Capítulo primero. Que trata", "Capítulo II. Donde"]],
    ["Chapitre premier", ["Chapitre premier", "Chapitre II"]],
    ["Kapitel 1", ["Kapitel 1", "Kapitel 2"]],
    ["I. A SCANDAL IN BOHEMIA", ["I. A SCANDAL IN BOHEMIA", "II. THE RED-HEADED LEAGUE"]],
  ];
  const second: Record<string, string> = {
    "STAVE I:  MARLEY'S GHOST": "STAVE II: THE FIRST SPIRIT",
    "Capítulo primero. Que trata": "Capítulo II. Donde",
    "Chapitre premier": "Chapitre II",
    "Kapitel 1": "Kapitel 2",
    "I. A SCANDAL IN BOHEMIA": "II. THE RED-HEADED LEAGUE",
  };
  for (const [first, expected] of cases) {
    const book = await extractFrom(
      "styles.txt",
      `Some Title\n\n${first}\n\nThe first body.\n\nI.\n\nA numbered section, not a chapter.\n\n` +
        `${second[first]}\n\nThe second body.\n`,
    );
    assert.deepEqual(titles(book), expected, first);
  }
});

/** The r20 book's result as its LF file gives it: what every line-end variant must give. */
const LAMPLIGHTER = {
  title: "The Lamplighter's Daughter",
  author: "Edith Marrow",
  chapters: ["CHAPTER I. THE LADDER", "CHAPTER II. THE FOG", "CHAPTER III. THE LAST LAMP"],
};

Deno.test("r20: a Gutenberg novel with CRLF line ends reads as its LF file does", async () => {
  const crlf = await Deno.readFile(new URL("r20-crlf-lines.txt", CASES));
  const lf = new TextDecoder().decode(crlf).replaceAll("\r\n", "\n");
  assert.ok(!lf.includes("\r"));
  const expected = await extractFrom("lf.txt", lf);
  const book = await extractCase("r20-crlf-lines.txt");
  assert.deepEqual(
    { title: book.title, author: book.author, chapters: titles(book) },
    LAMPLIGHTER,
  );
  assert.deepEqual(book.chapters, expected.chapters);
  // The "Produced by" credits end at the blank line after them, not at the end of the book.
  assert.doesNotMatch(book.chapters[0].html, /Produced by|candlelight/);
});

Deno.test("r21: a UTF-8 BOM and CR-only line ends read as the LF file does", async () => {
  const book = await extractCase("r21-cr-only-bom.txt");
  assert.deepEqual(
    { title: book.title, author: book.author, chapters: titles(book) },
    LAMPLIGHTER,
  );
  const lf = await extractFrom(
    "lf.txt",
    new TextDecoder().decode(await Deno.readFile(new URL("r21-cr-only-bom.txt", CASES)))
      .replaceAll("\r", "\n"),
  );
  assert.deepEqual(book.chapters, lf.chapters);
});

Deno.test("kind of r20/r21: every line-based rule reads \\r\\n, \\r and \\n alike", async () => {
  const book = "The Project Gutenberg eBook of Small Hours, by Ivo Lark\n\nTitle: Small Hours\n" +
    "        A Night Book\n\nAuthor: Ivo Lark\n\n*** START OF THE PROJECT GUTENBERG EBOOK SMALL " +
    "HOURS ***\n\nProduced by Somebody\nand a friend\n\nCONTENTS\n\nI. One\nII. Two\n\n" +
    "CHAPTER I.\nOne\n\nThe first hour.\n\nCHAPTER II.\nTwo\n\nThe second hour.\n\n" +
    "*** END OF THE PROJECT GUTENBERG EBOOK SMALL HOURS ***\n\nThe licence.\n";
  const expected = await extractFrom("lf.txt", book);
  assert.equal(expected.title, "Small Hours: A Night Book");
  assert.deepEqual(titles(expected), ["CHAPTER I. One", "CHAPTER II. Two"]);
  for (const end of ["\r\n", "\r"]) {
    const got = await extractFrom("ends.txt", book.replaceAll("\n", end));
    assert.deepEqual(got, expected, JSON.stringify(end));
  }
});

Deno.test("r22: lone roman numeral lines counting up from I are the chapters", async () => {
  const book = await extractCase("r22-bare-numerals.txt");
  assert.equal(book.title, "THE ORCHARD WALL");
  assert.equal(book.author, "Mary Holloway");
  assert.deepEqual(titles(book), ["I", "II", "III", "IV"]);
  assert.match(book.chapters[0].html, /^<p>The orchard wall had stood/);
  assert.deepEqual(book.warnings, []);
});

Deno.test("kind of r22: lone numerals divide only as a run from I, and never under CHAPTER headings", async () => {
  const sections = (numerals: string[]): string =>
    numerals.map((numeral, index) => `${numeral}\n\nSection ${index + 1} has its own text.\n\n`)
      .join("");
  for (const run of [["I", "II", "III"], ["I.", "II.", "III.", "IV.", "V."], ["i", "ii"]]) {
    const book = await extractFrom("run.txt", `Title\n\n${sections(run)}`);
    assert.deepEqual(titles(book), run, run.join(","));
  }
  // Starting again at I for a second part is still a run.
  const parts = await extractFrom("parts.txt", `Title\n\n${sections(["I", "II", "I", "II"])}`);
  assert.deepEqual(titles(parts), ["I", "II", "I", "II"]);
  // A stray numeral, or numerals that skip, divide nothing.
  for (const stray of [["I"], ["II", "III"], ["I", "III"], ["IV", "V", "VI"]]) {
    const book = await extractFrom("stray.txt", `Title\n\n${sections(stray)}`);
    assert.equal(book.chapters.length, 1, stray.join(","));
    assert.equal(book.warnings?.[0]?.kind, "no_headings");
  }
  // Under CHAPTER headings they number sections and stay in the text.
  const chaptered = await extractFrom(
    "chaptered.txt",
    `Title\n\nCHAPTER 1\n\n${sections(["I", "II"])}CHAPTER 2\n\n${sections(["I", "II"])}`,
  );
  assert.deepEqual(titles(chaptered), ["CHAPTER 1", "CHAPTER 2"]);
  assert.match(chaptered.chapters[0].html, /<p>I<\/p>\n<p>Section 1/);
});

Deno.test("r23: Chinese 第…回 headings with their couplet titles are the chapters", async () => {
  const book = await extractCase("r23-cjk-chapters.txt");
  assert.equal(book.title, "江村记");
  assert.deepEqual(titles(book), [
    "第一回 老渔翁江边拾玉 小书生月下题诗",
    "第二回 访名师书生离乡 遇风雨渔翁留客",
    "第三回 识古字真相大白 还白玉两家结亲",
  ]);
  assert.match(book.chapters[0].html, /^<p>话说江南有一个小村/);
  assert.deepEqual(book.warnings, []);
});

Deno.test("kind of r23: 第 + a Chinese or arabic number + 回, 章, 节 or 節, titled or not, in text, Markdown and HTML", async () => {
  const body = "他走了很久，终于到了城里。";
  for (
    const [first, second] of [
      ["第一章", "第二章"],
      ["第1章 出发", "第2章 归来"],
      ["第十九回　宝玉", "第二十回　黛玉"],
      ["第一節", "第二節"],
      ["第１节 开始", "第２节 结束"],
      ["第一百回", "第一百零一回"],
    ]
  ) {
    const text = await extractFrom(
      "cjk.txt",
      `书名\n\n${first}\n\n${body}\n\n${second}\n\n${body}\n`,
    );
    const expected = [first, second].map((title) => title.replace(/\s+/gu, " "));
    assert.deepEqual(titles(text), expected, first);
    const md = await extractFrom(
      "cjk.md",
      `# 书名\n\n## ${first}\n\n${body}\n\n## ${second}\n\n${body}\n`,
    );
    assert.deepEqual(titles(md), expected, first);
  }
  // A sentence that starts with the marker is prose: it has a comma or a full stop.
  const prose = await extractFrom(
    "prose.txt",
    `书名\n\n第一章写的是他的童年，第二章写的是他的晚年。\n\n${body}\n`,
  );
  assert.equal(prose.chapters.length, 1);
  // In HTML the level whose headings read as chapters divides the book, over plain h2 sections.
  const html = await extractFrom(
    "cjk.html",
    `<h1>书名</h1><h2>序</h2><p>${body}</p><h3>第一回 甲</h3><p>${body}</p>` +
      `<h3>第二回 乙</h3><p>${body}</p><h3>第三回 丙</h3><p>${body}</p><h2>跋</h2><p>${body}</p>`,
  );
  assert.deepEqual(titles(html), ["序", "第一回 甲", "第二回 乙", "第三回 丙", "跋"]);
});

Deno.test("kind of r23: the words for chapter, part and book in the major European languages", async () => {
  const styles: [string, string][] = [
    ["CHAPTER ONE", "CHAPTER TWO"],
    ["Chapitre premier", "Chapitre deuxième"],
    ["Erstes Kapitel", "Zweites Kapitel"],
    ["Kapitel 1", "Kapitel 2"],
    ["Capítulo primero", "Capítulo segundo"],
    ["Capitolo primo", "Capitolo secondo"],
    ["Capítulo I", "Capítulo II"],
    ["Hoofdstuk 1", "Hoofdstuk 2"],
    ["Rozdział pierwszy", "Rozdział drugi"],
    ["ГЛАВА ПЕРВАЯ", "ГЛАВА ВТОРАЯ"],
    ["Глава четвёртая", "Глава пятая"],
    ["Kapitola 1", "Kapitola 2"],
  ];
  const parts: [string, string][] = [
    ["Livre premier", "Livre deuxième"],
    ["Erster Teil", "Zweiter Teil"],
    ["Primera parte", "Segunda parte"],
    ["Parte prima", "Parte seconda"],
    ["Livro primeiro", "Livro segundo"],
    ["Deel 1", "Deel 2"],
    ["Część pierwsza", "Część druga"],
    ["Księga I", "Księga II"],
    ["Часть первая", "Часть вторая"],
    ["Книга I", "Книга II"],
  ];
  const body = "The text of it runs on, as a paragraph does, to its full stop.";
  for (const [first, second] of styles) {
    const book = await extractFrom(
      "words.txt",
      `Title\n\n${first}\n\n${body}\n\nI.\n\n${body}\n\n${second}\n\n${body}\n`,
    );
    assert.deepEqual(titles(book), [first, second], first);
  }
  for (const [first, second] of parts) {
    // A part over its first chapter is no chapter; a part with text under it is one.
    const book = await extractFrom(
      "parts.txt",
      `Title\n\n${first}\n\n${body}\n\n${second}\n\nChapter 1\n\n${body}\n`,
    );
    assert.deepEqual(titles(book), [first, "Chapter 1"], first);
  }
});

/** Every `href` in a chapter's html. */
function hrefs(html: string): string[] {
  return [...html.matchAll(/\shref="([^"]*)"/g)].map((match) => match[1]);
}

Deno.test("r24: links to ids in other chapters point at the chapter file that holds them", async () => {
  const book = await extractCase("r24-cross-chapter-anchor.html");
  assert.deepEqual(titles(book), [
    "CHAPTER I. THE GATE",
    "CHAPTER II. THE KEEPER",
    "CHAPTER III. THE FROST",
  ]);
  const [one, two, three] = book.chapters.map((chapter) => chapter.html);
  assert.deepEqual(hrefs(one), ["3.html#note1"]);
  assert.deepEqual(hrefs(two), ["1.html#ch1"]);
  assert.deepEqual(hrefs(three), ["#note1", "1.html#ref1"]);
  // The empty anchor before a heading, and the heading's own id, stay with that heading.
  assert.match(one, /^<a id="ch1"><\/a>/);
  assert.match(two, /^<span id="ch2"><\/span>/);
  assert.match(three, /^<a id="ch3"><\/a>/);
  assert.doesNotMatch(two, /id="ch3"/);
  assert.deepEqual(brokenLinks(book), []);
  assert.deepEqual(book.warnings, []);
});

Deno.test("kind of r24: every internal link lands, in HTML and Markdown; a link out of the book is text, with a warning", async () => {
  // Chapters × targets: each chapter links to an id in every chapter (a heading's, an anchor's,
  // a paragraph's), to the book's own file by name, to a missing id and to a sibling file.
  for (const count of [2, 3, 5]) {
    const chapters = Array.from({ length: count }, (_, i) => i + 1);
    const links = chapters.map((j) =>
      `<a href="#h${j}">h${j}</a> <a href="#p${j}">p${j}</a> <a href="book.html#a${j}">a${j}</a>`
    ).join(" ");
    const html = chapters.map((i) =>
      `<a id="a${i}"></a>\n<h2 id="h${i}">Chapter ${i}</h2><p id="p${i}">Text ${i}. ${links}</p>` +
      `<p><a href="#gone">gone</a> <a href="other.html#x">other</a></p>`
    ).join("\n");
    const book = await extractFrom("book.html", `<h1>Book</h1>${html}`);
    assert.equal(book.chapters.length, count);
    assert.deepEqual(brokenLinks(book), []);
    for (const [index, chapter] of book.chapters.entries()) {
      const expected = chapters.flatMap((j) => {
        const file = j === index + 1 ? "" : `${j}.html`;
        return [`${file}#h${j}`, `${file}#p${j}`, `${file}#a${j}`];
      });
      assert.deepEqual(hrefs(chapter.html), expected, `chapter ${index + 1} of ${count}`);
      // The removed links keep their text.
      assert.match(chapter.html, /<a>gone<\/a> <a>other<\/a>/);
    }
    assert.deepEqual(
      (book.warnings ?? []).map((warning) => warning.message),
      [
        'Link target "#gone" is not in the book; the link was removed',
        'Link target "other.html" is not in the book; the link was removed',
      ],
    );
  }
  const markdown = await extractFrom(
    "book.md",
    '# Book\n\n## One\n\nSee <a id="n1"></a>[the note](#n2) and [far](elsewhere.md).\n\n' +
      '## Two\n\n<p id="n2">The note. <a href="#n1">Back</a></p>\n',
  );
  assert.deepEqual(markdown.chapters.map((chapter) => hrefs(chapter.html)), [["2.html#n2"], [
    "1.html#n1",
  ]]);
  assert.deepEqual(brokenLinks(markdown), []);
  assert.equal(markdown.warnings?.length, 1);
});

Deno.test("r27: the heading level that holds the text divides the book; parts open their first chapter", async () => {
  const book = await extractCase("r27-heading-level-varies.html");
  assert.equal(book.title, "The Salt Road");
  assert.equal(book.author, "Agnes Pell");
  assert.deepEqual(titles(book), ["The Well", "The Pedlar", "The Map", "The Marsh", "The Sea"]);
  const tops = book.chapters.map((chapter) => /^<h2>([^<]*)<\/h2>/.exec(chapter.html)?.[1]);
  assert.deepEqual(tops, [
    "Part One: Inland",
    undefined,
    undefined,
    "Part Two: Coastward",
    undefined,
  ]);
  assert.match(book.chapters[0].html, /<p>The village had one well/);
  assert.deepEqual(book.warnings, []);
});

Deno.test("kind of r27: part levels over chapter levels, in HTML and Markdown, plain or numbered", async () => {
  for (const [partLevel, chapterLevel] of [[2, 3], [1, 2], [2, 4], [3, 4]]) {
    for (const numbered of [false, true]) {
      const name = (i: number): string => numbered ? `Chapter ${i}. Name ${i}` : `Name ${i}`;
      let html = partLevel > 1 ? "<h1>Title</h1>" : "";
      let md = partLevel > 1 ? "# Title\n\n" : "";
      let chapter = 0;
      for (const [part, size] of [["First", 2], ["Second", 3], ["Third", 1]] as const) {
        html += `<h${partLevel}>Part ${part}</h${partLevel}>`;
        md += `${"#".repeat(partLevel)} Part ${part}\n\n`;
        for (let k = 0; k < size; k += 1) {
          chapter += 1;
          html += `<h${chapterLevel}>${name(chapter)}</h${chapterLevel}><p>Text ${chapter}.</p>`;
          md += `${"#".repeat(chapterLevel)} ${name(chapter)}\n\nText ${chapter}.\n\n`;
        }
      }
      const expected = Array.from({ length: 6 }, (_, i) => name(i + 1));
      const label = `h${partLevel}/h${chapterLevel} ${numbered ? "numbered" : "plain"}`;
      for (const [file, source] of [["parts.html", html], ["parts.md", md]]) {
        const book = await extractFrom(file, source);
        assert.deepEqual(titles(book), expected, `${file} ${label}`);
        const tops = book.chapters.map((c) => /^<h\d>(Part \w+)<\/h\d>/.exec(c.html)?.[1] ?? null);
        assert.deepEqual(
          tops,
          ["Part First", null, "Part Second", null, null, "Part Third"],
          `${file} ${label}`,
        );
      }
    }
  }
  // A title over its subtitle on every chapter is no part level: the titles divide the book.
  const subtitled = await extractFrom(
    "subtitled.html",
    "<h1>Book</h1><h2>The Well</h2><h3>In which water</h3><p>One.</p>" +
      "<h2>The Pedlar</h2><h3>In which salt</h3><p>Two.</p>",
  );
  assert.deepEqual(titles(subtitled), ["The Well", "The Pedlar"]);
});

Deno.test("kind of r14: the Gutenberg header gives an HTML book's author and title, cleaned; the licence is kept apart", async () => {
  const licence = "<p>*** END OF THE PROJECT GUTENBERG EBOOK FRANKENSTEIN ***</p><p>Updated " +
    "editions will replace the previous one.</p><p>Section 1. General Terms of Use and " +
    "Redistributing Project Gutenberg™ electronic works</p>";
  const chapters = "<h2>Letter 1</h2><p>You will rejoice to hear.</p><h2>Letter 2</h2>" +
    "<p>How slowly the time passes.</p>";
  const headers = [
    // The header in one <pre>, with the start marker inside it (older files).
    "<pre>The Project Gutenberg EBook of Frankenstein\n\nTitle: Frankenstein;\nor, the Modern " +
    "Prometheus\n\nAuthor: Mary Wollstonecraft Shelley\n\n*** START OF THE PROJECT GUTENBERG " +
    "EBOOK FRANKENSTEIN ***\n</pre>",
    // The 2020s header: a #pg-header section, a <br> inside the title field.
    '<section class="pg-boilerplate pgheader" id="pg-header"><div id="pg-machine-header">' +
    "<p><strong>Title</strong>: Frankenstein;<br/>or, the modern prometheus</p>" +
    '<div id="pg-header-authlist"><p><strong>Author</strong>: Mary Wollstonecraft Shelley.</p>' +
    "</div></div></section><p>*** START OF THE PROJECT GUTENBERG EBOOK FRANKENSTEIN ***</p>",
  ];
  for (const header of headers) {
    const book = await extractFrom(
      "frankenstein.html",
      `<html><head><title>Frankenstein</title></head><body>${header}${chapters}${licence}` +
        "</body></html>",
    );
    assert.equal(book.title, "Frankenstein");
    assert.equal(book.author, "Mary Wollstonecraft Shelley");
    assert.deepEqual(titles(book), ["Letter 1", "Letter 2"]);
    assert.match(book.licence ?? "", /^\*\*\* END OF THE PROJECT GUTENBERG EBOOK FRANKENSTEIN/);
    assert.match(book.licence ?? "", /General Terms of Use/);
    for (const chapter of book.chapters) assert.doesNotMatch(chapter.html, /Gutenberg|Terms/);
  }
  const text = await extractCase("r20-crlf-lines.txt");
  assert.equal(
    text.licence,
    "*** END OF THE PROJECT GUTENBERG EBOOK THE LAMPLIGHTER'S DAUGHTER ***\n\nUpdated editions " +
      "will replace the previous one. The terms under which\nthis file may be copied are set out " +
      "in the licence that followed here.",
  );
  // No frame, no licence.
  assert.equal((await extractCase("r22-bare-numerals.txt")).licence, null);
});

Deno.test("kind of r14: header fields lose the punctuation that joined them to the next line", async () => {
  const cases: [string, string, string][] = [
    ["Title: Frankenstein;", "Author: Mary Shelley", "Frankenstein|Mary Shelley"],
    ["Title: Walden,", "Author: Henry Thoreau.", "Walden|Henry Thoreau"],
    ["Title: Who Stole the Tarts?", "Author: Lewis Carroll:", "Who Stole the Tarts?|Lewis Carroll"],
    ["Title: Essays", "Author: Martin Luther King, Jr.", "Essays|Martin Luther King, Jr."],
  ];
  for (const [title, author, expected] of cases) {
    const book = await extractFrom(
      "header.txt",
      `${title}\n\n${author}\n\n*** START OF THE PROJECT GUTENBERG EBOOK X ***\n\nCHAPTER 1\n\n` +
        "Text.\n\n*** END OF THE PROJECT GUTENBERG EBOOK X ***\n",
    );
    assert.equal(`${book.title}|${book.author}`, expected);
  }
});

Deno.test("kind of r12: a Markdown title is its first # heading or front matter, never a section heading", async () => {
  const about = "## About this book\n\nA note.\n\n## Chapter 1\n\nOne.\n\n## Chapter 2\n\nTwo.\n";
  assert.equal((await extractFrom("my-book.md", about)).title, "my-book");
  assert.equal((await extractFrom("my-book.md", `# Real Title\n\n${about}`)).title, "Real Title");
  assert.equal(
    (await extractFrom("my-book.md", `---\ntitle: "From Front"\n---\n\n${about}`)).title,
    "From Front",
  );
  assert.equal(
    (await extractFrom("my-book.md", `<h1 align="center">Центр</h1>\n\n${about}`)).title,
    "Центр",
  );
});

Deno.test("kind of r24: an HTML 4 <a name> anchor is a link target like an id", async () => {
  const book = await extractFrom(
    "named.html",
    '<h1>Book</h1><h2><a name="c1"></a>One</h2><p>Text. <a href="#c2">on</a></p>' +
      '<h2><a name="c2"></a>Two</h2><p>More. <a href="#c1">back</a></p>',
  );
  assert.deepEqual(book.chapters.map((chapter) => hrefs(chapter.html)), [["2.html#c2"], [
    "1.html#c1",
  ]]);
  assert.deepEqual(brokenLinks(book), []);
});
