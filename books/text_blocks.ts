/**
 * A plain-text book as paragraphs (`Block`: its trimmed lines, split at blank lines) and what the
 * reader asks of one: is it a heading, a title-like line group, a contents list. Also finds and
 * takes out the contents lists (books/text.ts runs it before it looks for chapters).
 *
 * @module
 */
import { classifyHeading, classifyLine, MAX_HEADING_CHARS } from "./text_headings.ts";

/** Fewest entries in a contents list that has no `CONTENTS` heading over it. */
export const MIN_CONTENTS_ENTRIES = 3;

/** Most paragraphs in a heading group: the heading and its subtitle lines. */
export const MAX_HEADING_GROUP = 4;

/**
 * A paragraph: its trimmed, non-empty lines, and what the readers below asked about it once
 * already (each is asked several times per paragraph). Kept on the array itself: a `WeakMap`
 * keyed by 200,000 paragraphs was a quarter of a long book's time (profile).
 */
export type Block = string[] & {
  [HEADING]?: ReturnType<typeof classifyHeading>;
  [CONTENTS_LIST]?: boolean;
};

export const HEADING = Symbol("heading");

export const CONTENTS_LIST = Symbol("contentsList");

/**
 * Take the contents lists out of the paragraphs: single-spaced ones (a paragraph of heading
 * lines) and runs of title-like paragraphs (see `extractText`).
 *
 * @returns the paragraphs left, and the contents entries' keys (see `entryKey`).
 */
export function findContents(blocks: Block[]): { blocks: Block[]; entries: Set<string> } {
  const entries = new Set<string>();
  const kept: Block[] = [];
  const isEntry = (block: Block): boolean => {
    if (isContentsList(block)) return true;
    // A lone numeral ("I.") over a story's first section is no contents entry.
    const heading = styledHeadingOf(block);
    return heading !== null ? heading.lineCount === block.length : isTitleLike(block);
  };
  // A contents list with no CONTENTS line over it is looked for only at the front, before the
  // first paragraph of prose: in the body, runs of short lines are letters' datelines and verse.
  let front = true;
  let index = 0;
  while (index < blocks.length) {
    if (!isEntry(blocks[index])) {
      kept.push(blocks[index]);
      front = false;
      index += 1;
      continue;
    }
    let end = index;
    while (end < blocks.length && isEntry(blocks[end])) end += 1;
    // A heading over a body may carry a few title-like lines (a subtitle, "(Kept in shorthand.)"):
    // from the last heading in the run on, they belong to that body. Past that many, the run is a
    // contents list whose last entry is a heading (the Quijote's "Prólogo al lector" entry); its
    // last paragraph before a body is that body's heading.
    const last = findLastIndex(blocks, index, end, (block) => {
      const kind = styledHeadingOf(block)?.kind;
      return kind !== undefined && kind !== "contents";
    });
    const runEnd = last !== -1 && end - last <= MAX_HEADING_GROUP
      ? last
      : end < blocks.length
      ? end - 1
      : end;
    // With a CONTENTS line, the list starts there (a title page or an epigraph may precede it);
    // without one, only a front run holding two or more styled headings is a contents list.
    const line = findLastIndex(blocks, index, runEnd, (block) => isContentsLine(block), true);
    const from = line !== -1 ? line : index;
    const run = blocks.slice(from, runEnd);
    const styled = run.filter((block) => styledHeadingOf(block) !== null).length;
    append(kept, blocks, index, from);
    if (
      line !== -1 ? run.length >= 2 : front && run.length >= MIN_CONTENTS_ENTRIES && styled >= 2
    ) {
      // One entry per line of a single-spaced list, else one per paragraph (an entry wraps).
      const names = run.flatMap((block) => isContentsList(block) ? block : [block.join(" ")]);
      for (const key of names.map(entryKey)) {
        // "* * *" and bare numbers name nothing.
        if (/\p{L}{2}/u.test(key)) entries.add(key);
      }
    } else {
      append(kept, blocks, from, runEnd);
    }
    append(kept, blocks, runEnd, end);
    index = end;
  }
  return { blocks: kept.filter((block) => !isContentsList(block)), entries };
}

/**
 * Append `blocks[from..to)` to `kept`. Not `push(...slice)`: a run can be a whole book of short
 * paragraphs (verse), and a spread of 200,000 arguments overflows the stack.
 */
export function append(kept: Block[], blocks: Block[], from: number, to: number): void {
  for (let index = from; index < to; index += 1) kept.push(blocks[index]);
}

/** The last (or, with `first`, the first) index in `[from, to)` whose block passes, or -1. */
export function findLastIndex(
  blocks: Block[],
  from: number,
  to: number,
  test: (block: Block) => boolean,
  first = false,
): number {
  if (first) {
    for (let index = from; index < to; index += 1) if (test(blocks[index])) return index;
    return -1;
  }
  for (let index = to - 1; index >= from; index -= 1) if (test(blocks[index])) return index;
  return -1;
}

/** A paragraph opening with a `CONTENTS` line. */
export function isContentsLine(block: Block): boolean {
  return classifyLine(block[0]) === "contents";
}

/** A contents entry reduced to its letters and digits, page number and leader dots left out. */
export function entryKey(text: string): string {
  return text.toLowerCase().replace(/[.\s]*\d+$/u, "").replace(/[^\p{L}\p{N}]+/gu, "");
}

/** Up to four short lines, the last ending no sentence: a title, or a contents entry. */
export function isTitleLike(block: Block): boolean {
  return isShort(block) && !/[.!?…"”’»:;,]$/.test(block[block.length - 1]);
}

/** Up to four lines, none longer than a heading. */
export function isShort(block: Block): boolean {
  return block.length <= 4 && block.every((line) => line.length <= MAX_HEADING_CHARS);
}

/** A paragraph of two or more lines, at least two of them headings: a single-spaced contents list. */
export function isContentsList(block: Block): boolean {
  if (block.length < 2) return false;
  const known = block[CONTENTS_LIST];
  if (known !== undefined) return known;
  // A list starts with its entries: a paragraph whose first two lines are prose is prose. This
  // keeps the scan to two lines for almost every paragraph of a book.
  const listed = (isHeadingLine(block[0]) || isHeadingLine(block[1])) &&
    countHeadingLines(block) >= 2;
  block[CONTENTS_LIST] = listed;
  return listed;
}

/** `classifyHeading` of a paragraph, asked once: the readers below ask it several times each. */
export function headingOf(block: Block): ReturnType<typeof classifyHeading> {
  let heading = block[HEADING];
  if (heading === undefined) block[HEADING] = heading = classifyHeading(block);
  return heading;
}

/**
 * `headingOf`, less lone numerals (`I.`): those divide a book only as a run (`chooseLevels`) and
 * say nothing about contents lists.
 */
export function styledHeadingOf(block: Block): ReturnType<typeof classifyHeading> {
  const heading = headingOf(block);
  return heading?.kind === "bare" ? null : heading;
}

/** A line styled as a heading, a lone numeral aside. */
export function isHeadingLine(line: string): boolean {
  const kind = classifyLine(line);
  return kind !== null && kind !== "bare";
}

/** How many lines of the paragraph are headings; `0` when a line is too long for one. */
export function countHeadingLines(block: Block): number {
  let headingLines = 0;
  for (const line of block) {
    if (line.length > MAX_HEADING_CHARS) return 0;
    if (isHeadingLine(line)) headingLines += 1;
  }
  return headingLines;
}

/** Split lines into paragraphs at blank lines; each paragraph is its trimmed, non-empty lines. */
export function toBlocks(lines: string[]): Block[] {
  const blocks: Block[] = [];
  let current: string[] = [];
  for (const line of lines) {
    const text = line.trim();
    if (text !== "") {
      current.push(text);
    } else if (current.length > 0) {
      blocks.push(current);
      current = [];
    }
  }
  if (current.length > 0) blocks.push(current);
  return blocks;
}
