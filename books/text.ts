/**
 * Plain-text books: cutting the Project Gutenberg frame, finding the heading level that divides
 * the book (the heading styles are in `text_headings.ts`), leaving out contents lists, reading the
 * title and byline at the top, and turning blank-line separated paragraphs into escaped `<p>`
 * elements. Also owns the byline rule (`by X`, `Author: X`) the Markdown and HTML readers reuse.
 *
 * @module
 */
import {
  type BookWarning,
  collapseWhitespace,
  type ExtractedBook,
  type ExtractedChapter,
  fileStem,
} from "./book.ts";
import { stripGutenbergFrame } from "./gutenberg.ts";
import { escapeHtml } from "./sanitize.ts";
import { type HeadingKind, MAX_HEADING_CHARS, romanValue } from "./text_headings.ts";
import { type Block, entryKey, headingOf, isShort, toBlocks } from "./text_blocks.ts";
import { findContents } from "./text_contents.ts";

/** How many paragraphs at the top of a book are searched for the title and byline. */
const FRONT_MATTER_BLOCKS = 4;

/**
 * Longest title page left out of the chapters, in characters: what is left at the top once the
 * title and byline are taken (a subtitle, "IN PROSE / BEING"), in short lines without a sentence's
 * end. Longer, or prose, and it is a chapter titled like the book.
 */
const MAX_TITLE_PAGE_CHARS = 300;

/**
 * A heading paragraph, classified, with its title and the body lines under it in the paragraph.
 * `listed`: a line the book's own contents list names ("STORY OF THE DOOR").
 */
interface Heading {
  kind: HeadingKind | "listed" | "letter";
  title: string;
  rest: Block;
}

/**
 * Read a plain-text book into chapters at the heading level that divides it.
 *
 * The Project Gutenberg frame is cut off first (`books/gutenberg.ts`); its header gives the title
 * and author. The text is cut into paragraphs at blank lines. The title and byline are read from
 * the top. Contents lists are left out: a paragraph with two or more heading lines, and a run of
 * three or more title-like paragraphs with no text between them (each a heading or a short line
 * that ends no sentence; the last one before a body is that body's heading). The entries of a
 * contents list name chapters: a later paragraph that repeats one, with text under it, is a
 * heading. The heading styles (`books/text_headings.ts`) divide at this level: `CHAPTER`-style when
 * the book has any, else bare numerals with titles (`I. A SCANDAL IN BOHEMIA`) when it has two or
 * more, else lone numeral lines (`IV`) when they count up from `I`; parts (`BOOK ONE`), front and back matter (`PREFACE`) and contents entries at every level.
 * A heading with no text under it (a part title right over its first chapter) is not a chapter;
 * a `CONTENTS` heading's section is left out. Text before the first heading: a short title page is
 * left out (with a warning), anything else is a chapter titled like the book.
 *
 * @param source the decoded file text.
 * @param path the file's path (its stem is the fallback title).
 * @param signal checked between chapters; aborting throws `signal.reason`.
 * @returns the book with its `warnings`; `chapters` may be empty, which the caller rejects.
 */
export function extractText(source: string, path: string, signal: AbortSignal): ExtractedBook {
  const frame = stripGutenbergFrame(source);
  const raw = toBlocks(frame.body.split("\n"));
  const firstRaw = raw.findIndex((block) => headingOf(block) !== null);
  const front = readFrontMatter(
    raw.slice(0, firstRaw === -1 ? raw.length : firstRaw),
    firstRaw !== -1,
    frame.title,
  );
  const contents = findContents([
    ...front.rest,
    ...raw.slice(firstRaw === -1 ? raw.length : firstRaw),
  ]);
  const title = front.title ?? fileStem(path);
  // The half-title over chapter 1 may sit among the contents entries: it names no chapter.
  contents.entries.delete(entryKey(title));
  const blocks = joinSplitEntries(contents.blocks, contents.entries);
  const headings = blocks.map((block) => readHeading(block, contents.entries));
  const levels = chooseLevels(headings);
  if (levels.has("numeral")) readNumeralGaps(headings);
  if (!levels.has("chapter") && !levels.has("numeral") && !levels.has("bare")) {
    readLetterHeadings(blocks, headings, levels);
  }
  const warnings: BookWarning[] = [];

  const isSplit = (heading: Heading | null): heading is Heading =>
    heading !== null && levels.has(heading.kind);
  const first = headings.findIndex(isSplit);
  const preamble = blocks.slice(0, first === -1 ? blocks.length : first);
  const chapters: ExtractedChapter[] = [];
  if (preamble.length > 0) {
    if (first !== -1 && isTitlePage(preamble)) {
      warnings.push({
        kind: "front_matter_dropped",
        message: `Title page text left out: "${collapseWhitespace(preamble.flat().join(" "))}"`,
      });
    } else {
      chapters.push({ title, html: toParagraphs(preamble) });
    }
  }
  let index = first === -1 ? blocks.length : first;
  // A part heading with nothing under it (`PART TWO` right over its `Chapter 1`) is shown at the
  // top of the next chapter, as the HTML reader shows it: a part's name is the book's text too.
  // Other headings with nothing under them (a contents list's entries) are left out.
  let carried = "";
  while (index < blocks.length) {
    signal.throwIfAborted();
    const heading = headings[index] as Heading;
    let next = index + 1;
    while (next < blocks.length && !isSplit(headings[next])) next += 1;
    const body = [heading.rest, ...blocks.slice(index + 1, next)].filter((block) =>
      block.length > 0
    );
    if (body.length > 0) {
      chapters.push({ title: heading.title, html: carried + toParagraphs(body) });
      carried = "";
    } else if (heading.kind === "part") {
      carried += `<h2>${escapeHtml(heading.title)}</h2>\n`;
    }
    index = next;
  }
  if (chapters.length === 0 && blocks.length > 0) {
    // Every heading found had nothing under it (a book of short lines the contents list names):
    // the text, headings and all, is one chapter rather than none.
    chapters.push({ title, html: toParagraphs(blocks) });
    warnings.push({
      kind: "no_headings",
      message: "No chapter headings with text under them: the book is one chapter",
    });
  } else if (first === -1 && chapters.length > 0) {
    warnings.push({
      kind: "no_headings",
      message: "No chapter headings found: the book is one chapter",
    });
  }
  return {
    format: "text",
    title,
    author: frame.author ?? front.author,
    chapters,
    warnings,
    licence: frame.licence,
  };
}

/** Most paragraphs one contents entry's title is set over in the body. */
const MAX_ENTRY_PARAGRAPHS = 3;

/**
 * The paragraphs with a contents entry's title set over several short paragraphs in the body
 * made one paragraph (`DE GETERGDE ZACHTMOEDIGHEID,` / `OF,` / `»'T SOP WAS DE KOOL NIET
 * WAARD."`, listed on one or two lines), so it is one heading; the longest run that is an entry
 * wins.
 */
function joinSplitEntries(blocks: Block[], entries: ReadonlySet<string>): Block[] {
  if (entries.size === 0) return blocks;
  const joined: Block[] = [];
  let index = 0;
  while (index < blocks.length) {
    let taken = 1;
    for (let count = isShort(blocks[index]) ? MAX_ENTRY_PARAGRAPHS : 1; count >= 2; count -= 1) {
      const run = blocks.slice(index, index + count);
      const lines = run.flat();
      if (
        run.length === count && run.every((block) => headingOf(block) === null) &&
        isShort(lines) && entries.has(entryKey(lines.join(" ")))
      ) {
        taken = count;
        break;
      }
    }
    joined.push(taken === 1 ? blocks[index] : blocks.slice(index, index + taken).flat());
    index += taken;
  }
  return joined;
}

/** The paragraph as a heading, when it is one (by its style, or named by the contents); else `null`. */
function readHeading(block: Block, entries: ReadonlySet<string>): Heading | null {
  const found = headingOf(block);
  if (found !== null) {
    return {
      kind: found.kind,
      title: collapseWhitespace(block.slice(0, found.lineCount).join(" ")),
      rest: block.slice(found.lineCount),
    };
  }
  // Named by the book's own contents: "AL DUQUE DE BÉJAR," may end as a sentence never would.
  // A quoted line is speech or a signature ("DRACULA." under a letter), never a heading.
  if (
    entries.size > 0 && isShort(block) && !/^["“‘'(]/.test(block[0]) &&
    entries.has(entryKey(block.join(" ")))
  ) {
    return { kind: "listed", title: collapseWhitespace(block.join(" ")), rest: [] };
  }
  return null;
}

/**
 * The heading kinds that divide this book: chapters when it has any, else titled numerals when it
 * has two or more; parts, front and back matter, contents entries and the contents heading always.
 */
function chooseLevels(headings: (Heading | null)[]): Set<Heading["kind"]> {
  const count = (kind: HeadingKind): number =>
    headings.filter((heading) => heading?.kind === kind).length;
  // A CONTENTS line left in the text divides nothing: its list is taken out already
  // (`findContents`), and what follows it is text.
  const levels = new Set<Heading["kind"]>(["part", "matter", "listed"]);
  if (count("chapter") > 0) levels.add("chapter");
  // A play is read a chapter per act, its scenes inside (they run from a few lines to pages); a
  // play with no act headings, a chapter per scene.
  else if (count("scene") >= 2) levels.add("scene");
  else if (count("numeral") >= 2) levels.add("numeral");
  // Lone numerals under chapters the contents list names number those chapters' sections.
  else if (
    headings.filter((heading) => heading?.kind === "listed").length < 2 &&
    countsUp(headings.filter((heading) => heading?.kind === "bare"))
  ) levels.add("bare");
  return levels;
}

/**
 * A dictionary's or glossary's sections: paragraphs that are one capital letter alone (`A`, `B`,
 * … `Z`), three or more, in alphabetical order from the first letter of the alphabet (A, А, Α).
 * Where they run so, they divide the book (when no chapter heading does) and become its
 * headings, in `headings` and `levels`; a lone `I`, `C` or `X` among them is a letter, not a
 * numeral.
 */
function readLetterHeadings(
  blocks: Block[],
  headings: (Heading | null)[],
  levels: Set<Heading["kind"]>,
): void {
  const at = blocks.flatMap((block, index) =>
    block.length === 1 && /^\p{Lu}$/u.test(block[0]) ? [index] : []
  );
  const letters = at.map((index) => blocks[index][0]);
  const ordered = letters.length >= 3 && /^[AАΑ]$/.test(letters[0]) &&
    letters.every((letter, i) => i === 0 || letter.localeCompare(letters[i - 1]) > 0);
  if (!ordered) return;
  for (const index of at) {
    headings[index] = { kind: "letter", title: blocks[index][0], rest: blocks[index].slice(1) };
  }
  levels.add("letter");
}

/**
 * Where titled numerals divide the book, a lone numeral that is the one missing from their run
 * (`I.` over an illustration before `II. Papa se fâche.`) is a chapter too: its value one less than
 * the next titled numeral's and one more than the previous one's, if any. A story's section
 * numerals inside a chapter (`I.` … `IV.` under `III. THE STORY`) fit neither side.
 */
function readNumeralGaps(headings: (Heading | null)[]): void {
  const value = (heading: Heading | null): number | null =>
    heading === null ? null : romanValue(heading.title.split(" ")[0]);
  const numerals = headings.flatMap((heading, index) => heading?.kind === "numeral" ? [index] : []);
  let at = 0;
  for (const [index, heading] of headings.entries()) {
    while (at < numerals.length && numerals[at] < index) at += 1;
    if (heading?.kind !== "bare" || at === numerals.length) continue;
    const own = value(heading);
    const next = value(headings[numerals[at]]);
    const previous = at === 0 ? null : value(headings[numerals[at - 1]]);
    if (
      own !== null && next !== null && own === next - 1 &&
      (previous === null ? own === 1 : previous === own - 1)
    ) {
      headings[index] = { ...heading, kind: "numeral" };
    }
  }
}

/**
 * Whether lone numerals count up from `I`, two or more of them: `I`, `II`, `III` (starting again
 * at `I` in a new part). One that skips or goes back is a stray line, and then none divides.
 */
function countsUp(bare: (Heading | null)[]): boolean {
  const values = bare.map((heading) => romanValue(heading?.title ?? ""));
  return values.length >= 2 && values[0] === 1 &&
    values.every((value, index) =>
      value !== null && (index === 0 || value === 1 || value === (values[index - 1] ?? 0) + 1)
    );
}

/** Short lines, none ending a sentence, few characters: a title page's subtitle and imprint. */
function isTitlePage(blocks: Block[]): boolean {
  const lines = blocks.flat();
  return lines.join(" ").length <= MAX_TITLE_PAGE_CHARS &&
    lines.every((line) => line.length <= 60 && !/[.!?…"”’]$/.test(line));
}

/**
 * Read an author's name out of a byline: `by Lewis Carroll`, `Author: Lewis Carroll` (after
 * `by`, the name must not start with a lower-case letter).
 *
 * @param line one line or paragraph of plain text.
 * @returns the name, whitespace collapsed, or `null` when the line is not a byline.
 */
export function parseByline(line: string): string | null {
  const text = collapseWhitespace(line);
  if (text.length > MAX_HEADING_CHARS) return null;
  const labelled = /^author\s*:\s*(\S.*)$/i.exec(text);
  if (labelled !== null) return labelled[1];
  // "by the river" inside wrapped prose is not a byline: a name starts with a capital.
  const by = /^by\s+(\S.*)$/i.exec(text);
  return by === null || /^\p{Ll}/u.test(by[1]) ? null : by[1];
}

interface FrontMatter {
  title: string | null;
  author: string | null;
  /** The preamble's paragraphs left once the title and byline lines are taken out. */
  rest: Block[];
}

/**
 * Take the title and byline out of the paragraphs before the first heading: `Title:` and `by X` /
 * `Author:` lines near the top, a first paragraph that repeats the known title (a Gutenberg
 * header's), else a lone short first line when something follows it.
 */
function readFrontMatter(
  blocks: Block[],
  hasHeadings: boolean,
  knownTitle: string | null,
): FrontMatter {
  let title = knownTitle;
  let author: string | null = null;
  const top: Block[] = [];
  for (const block of blocks.slice(0, FRONT_MATTER_BLOCKS)) {
    const kept: string[] = [];
    for (const line of block) {
      const labelled = /^title\s*:\s*(\S.*)$/i.exec(line);
      const name = parseByline(line);
      if (title === null && labelled !== null) title = collapseWhitespace(labelled[1]);
      else if (author === null && name !== null) author = name;
      else kept.push(line);
    }
    top.push(kept);
  }
  const rest = [...top, ...blocks.slice(FRONT_MATTER_BLOCKS)].filter((block) => block.length > 0);
  // "[Illustration]" or "cover" above the title is a picture, not the title.
  const at = rest.findIndex((block) => !/^(?:\[Illustration|cover$)/i.test(block[0]));
  const first = rest[at];
  if (first !== undefined && title !== null && repeatsTitle(first, title)) {
    rest.splice(at, 1);
  } else if (
    // A lone short first line is the title only when something follows it; a one-line book's
    // only line is its text.
    title === null && first !== undefined && first.length === 1 &&
    first[0].length <= MAX_HEADING_CHARS && (rest.length > at + 1 || hasHeadings)
  ) {
    // 《红楼梦》: CJK title marks say "this is a title", they are not part of it.
    title = collapseWhitespace(first[0]).replace(/^[《「『](.+)[》」』]$/u, "$1");
    rest.splice(at, 1);
  }
  return { title, author, rest };
}

/** Whether a paragraph is the book's title set as a title page ("A CHRISTMAS CAROL"). */
function repeatsTitle(block: Block, title: string): boolean {
  const letters = (text: string): string => text.toLowerCase().replace(/[^\p{L}\p{N}]+/gu, "");
  const shown = letters(block.join(" "));
  const known = letters(title);
  return shown.length > 0 && (known.startsWith(shown) || shown.startsWith(known));
}

function toParagraphs(blocks: Block[]): string {
  // Lines stay on their own lines inside the <p>: a browser shows them as one flowing paragraph,
  // and the original line breaks (verse, letters) survive for whoever needs them.
  return blocks.map((block) => `<p>${escapeHtml(block.join("\n"))}</p>`).join("\n");
}
