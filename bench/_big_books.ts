/**
 * Big generated books for `deno task fidelity --large` ("Big books stay fast and small":
 * MB/s and peak RSS for big inputs): two EPUBs — 2,014 chapters in ~10 MB and a
 * ~1 MB MathML textbook (`tests/_epub.ts`) — and a ~10 MB novel in each text format, generated
 * here, never committed. Each comes with the chapter titles it must come out with.
 *
 * @module
 */
import { bigEpub } from "../tests/_epub.ts";

/** A generated book: its file name, bytes and the chapter titles expected. */
export interface BigBook {
  file: string;
  bytes: Uint8Array;
  title: string;
  author: string | null;
  /** Every chapter title, in order; `null` when only the count is checked (`chapterCount`). */
  chapters: string[] | null;
  chapterCount: number;
}

const WORDS = ("the whale ship sea captain harpoon deck wind storm voyage night island mast sail " +
  "rope anchor harbour wave compass lantern").split(" ");

/** A deterministic word stream (the same book on every run). */
function words(seed: number): () => string {
  let state = seed;
  return () => WORDS[(state = (state * 1103515245 + 12345) % 2147483648) % WORDS.length];
}

/** `CHAPTER` numbers as books print them. */
function roman(n: number): string {
  const digits: Array<[number, string]> = [
    [1000, "M"],
    [900, "CM"],
    [500, "D"],
    [400, "CD"],
    [100, "C"],
    [90, "XC"],
    [50, "L"],
    [40, "XL"],
    [10, "X"],
    [9, "IX"],
    [5, "V"],
    [4, "IV"],
    [1, "I"],
  ];
  let out = "";
  for (const [value, letters] of digits) {
    while (n >= value) {
      out += letters;
      n -= value;
    }
  }
  return out;
}

/** One chapter's paragraphs: `paragraphs` of about 100 words each, as lines of prose. */
function prose(word: () => string, paragraphs: number): string[] {
  return Array.from({ length: paragraphs }, () => {
    const text = Array.from({ length: 100 }, word).join(" ");
    return `${text[0].toUpperCase()}${text.slice(1)}.`;
  });
}

/** Wrap prose at 72 columns, as Gutenberg texts are. */
function wrap(paragraph: string): string {
  return paragraph.replace(/(.{1,72})(?: |$)/g, "$1\n").trimEnd();
}

/**
 * The generated books.
 *
 * @returns the two EPUBs and a ~10 MB text, HTML and Markdown novel (about 2,000
 *   chapters of 8 paragraphs each).
 */
export function bigBooks(): BigBook[] {
  const chapters = 2_000;
  const titles: string[] = [];
  const bodies: string[][] = [];
  const word = words(11);
  for (let i = 1; i <= chapters; i++) {
    titles.push(`The ${word()} and the ${word()}`);
    bodies.push(prose(word, 8));
  }
  const encode = (text: string): Uint8Array => new TextEncoder().encode(text);

  const text = ["THE LONG VOYAGE", "", "by Bench Writer", ""];
  for (const [i, title] of titles.entries()) {
    text.push("", "", `CHAPTER ${roman(i + 1)}.`, title, "");
    for (const paragraph of bodies[i]) text.push(wrap(paragraph), "");
  }
  const html = [
    '<!DOCTYPE html><html><head><meta charset="utf-8"><title>The Long Voyage</title>',
    '<meta name="author" content="Bench Writer"></head><body><h1>The Long Voyage</h1>',
  ];
  for (const [i, title] of titles.entries()) {
    html.push(`<h2 id="ch${i + 1}">Chapter ${i + 1}. ${title}</h2>`);
    for (const paragraph of bodies[i]) html.push(`<p>${paragraph}</p>`);
  }
  html.push("</body></html>");
  const md = ["# The Long Voyage", "", "by Bench Writer", ""];
  for (const [i, title] of titles.entries()) {
    md.push(`## Chapter ${i + 1}. ${title}`, "");
    for (const paragraph of bodies[i]) md.push(paragraph, "");
  }

  return [
    {
      file: "big-2014-chapters.epub",
      bytes: bigEpub(2014, { paragraphs: 12 }),
      title: "Big Book",
      author: "Bench Writer",
      chapters: null,
      // The navigation document and the notes lead and close the spine.
      chapterCount: 2016,
    },
    {
      file: "mathml-textbook.epub",
      bytes: bigEpub(200, { paragraphs: 1, math: 60 }),
      title: "Big Book",
      author: "Bench Writer",
      chapters: null,
      chapterCount: 202,
    },
    {
      file: "big-novel.txt",
      bytes: encode(text.join("\n")),
      title: "THE LONG VOYAGE",
      author: "Bench Writer",
      chapters: titles.map((title, i) => `CHAPTER ${roman(i + 1)}. ${title}`),
      chapterCount: chapters,
    },
    {
      file: "big-novel.html",
      bytes: encode(html.join("\n")),
      title: "The Long Voyage",
      author: "Bench Writer",
      chapters: titles.map((title, i) => `Chapter ${i + 1}. ${title}`),
      chapterCount: chapters,
    },
    {
      file: "big-novel.md",
      bytes: encode(md.join("\n")),
      title: "The Long Voyage",
      author: "Bench Writer",
      chapters: titles.map((title, i) => `Chapter ${i + 1}. ${title}`),
      chapterCount: chapters,
    },
  ];
}
