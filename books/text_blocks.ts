/**
 * A plain-text book as paragraphs (`Block`: its trimmed lines, split at blank lines) and what the
 * reader asks of one: is it a heading, a title-like line group, a contents list
 * (`books/text_contents.ts` finds and takes out the lists).
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

/**
 * A contents entry or a heading reduced to its letters and digits, lower-cased, a trailing page
 * number and leader dots (`THE DEPARTURE ..... 3.`), footnote marks (`OM DEN ZUID[11].`) and all
 * punctuation left out: the list's `The Departure` names the body's `THE DEPARTURE.`.
 */
export function entryKey(text: string): string {
  return text.toLowerCase().replace(/\[\d+\]/gu, "").replace(/[.\s]*\d+\.?$/u, "")
    .replace(/[^\p{L}\p{N}]+/gu, "");
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
