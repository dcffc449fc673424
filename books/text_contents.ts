/**
 * Contents lists in a plain-text book: where one starts and ends, taking it out of the
 * paragraphs, and keeping its entries, which name the chapters (`books/text.ts` reads a later
 * paragraph that repeats an entry as a heading).
 *
 * @module
 */
import { classifyLine, MAX_HEADING_CHARS } from "./text_headings.ts";
import {
  append,
  type Block,
  entryKey,
  findLastIndex,
  isContentsLine,
  isContentsList,
  isShort,
  isTitleLike,
  MAX_HEADING_GROUP,
  MIN_CONTENTS_ENTRIES,
  styledHeadingOf,
} from "./text_blocks.ts";

/** Most entries a heading is looked for as the start of (`repeatsEntry`). */
const MAX_PREFIX_ENTRIES = 1_000;

/** A page number after an entry, with its leader dots or spaces: `   3.`, `..... 17`. */
const PAGE_NUMBER = /[.\s]+\d+\.?$/u;

/**
 * Take the contents lists out of the paragraphs: the list under a `CONTENTS` line (see
 * `listEnd`), single-spaced ones (a paragraph of heading lines) and, at the front of the book,
 * runs of title-like paragraphs holding two or more styled headings (see `extractText`).
 *
 * @returns the paragraphs left, and the contents entries' keys (see `entryKey`).
 */
export function findContents(blocks: Block[]): { blocks: Block[]; entries: Set<string> } {
  const entries = new Set<string>();
  const kept: Block[] = [];
  const later = shortIndex(blocks, "last");
  const earlier = shortIndex(blocks, "first");
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
    if (isContentsLine(blocks[index])) {
      const end = listEnd(blocks, index, later, earlier);
      if (end === index) {
        // No list under it (prose follows, or short lines to the end of the book): the line is
        // kept as text, and so is what follows.
        kept.push(blocks[index]);
        index += 1;
      } else {
        addEntries(blocks, index, end, entries);
        index = end;
      }
      front = false;
      continue;
    }
    if (!isEntry(blocks[index])) {
      kept.push(blocks[index]);
      front = false;
      index += 1;
      continue;
    }
    let end = index;
    while (end < blocks.length && isEntry(blocks[end]) && !isContentsLine(blocks[end])) end += 1;
    // A heading over a body may carry a few title-like lines (a subtitle, "(Kept in shorthand.)"):
    // from the last heading in the run on, they belong to that body. Past that many, the run is a
    // contents list whose last entry is a heading (the Quijote's "Prólogo al lector" entry); its
    // last paragraph before a body is that body's heading.
    const runEnd = bodyStart(blocks, index, end);
    const run = blocks.slice(index, runEnd);
    const styled = run.filter((block) => styledHeadingOf(block) !== null).length;
    // A list names what follows it: a run none of whose entries comes again is the body's
    // headings (a play's act and scene lines over its first speech).
    const namedAgain = run.some((block) =>
      (isContentsList(block) ? block : [block.join(" ")]).some((name) =>
        (later.get(entryKey(name)) ?? -1) >= end
      )
    );
    if (front && run.length >= MIN_CONTENTS_ENTRIES && styled >= 2 && namedAgain) {
      // One entry per line of a single-spaced list, else one per paragraph (an entry wraps).
      const names = run.flatMap((block) => isContentsList(block) ? block : [block.join(" ")]);
      for (const key of names.map(entryKey)) {
        // "* * *" and bare numbers name nothing.
        if (/\p{L}{2}/u.test(key)) entries.add(key);
      }
    } else {
      append(kept, blocks, index, runEnd);
    }
    append(kept, blocks, runEnd, end);
    index = end;
  }
  return { blocks: kept.filter((block) => !isContentsList(block)), entries };
}

/**
 * Where the body starts in a run of entry-like paragraphs `[from, end)` that prose ends: at the
 * run's last styled heading when only a heading group's worth of paragraphs follows it, else at
 * its last paragraph (that body's heading); `end` when the run ends the book.
 */
function bodyStart(blocks: Block[], from: number, end: number): number {
  const last = findLastIndex(blocks, from, end, (block) => {
    const kind = styledHeadingOf(block)?.kind;
    return kind !== undefined && kind !== "contents";
  });
  return last !== -1 && end - last <= MAX_HEADING_GROUP
    ? last
    : end < blocks.length
    ? end - 1
    : end;
}

/**
 * The end of the contents list under the `CONTENTS` line at `at`: a contents list never eats the
 * body. The list is the run of entry paragraphs after the line (see `isEntryBlock`); it ends at
 * the first paragraph that repeats one of its entries with a body following (the first
 * chapter's heading), or at the first paragraph that is not an entry. When prose ends it and no
 * entry is named again further on, the list's last paragraphs are that prose's heading group
 * (`bodyStart`).
 *
 * @returns the index after the list; `at` when there is no list (prose right under the line, or
 *   entry-like paragraphs to the end of the book that name nothing before them: verse).
 */
function listEnd(
  blocks: Block[],
  at: number,
  later: ReadonlyMap<string, number>,
  earlier: ReadonlyMap<string, number>,
): number {
  const seen = new Set<string>();
  // Entries may stand on the CONTENTS paragraph's own lines.
  for (const line of blocks[at].slice(1)) addKey(seen, line);
  let end = at + 1;
  while (end < blocks.length) {
    const block = blocks[end];
    // Another CONTENTS line starts a list of its own.
    if (isContentsLine(block)) break;
    if (seen.size > 0 && repeatsEntry(block, seen) && bodyFollows(blocks, end, later)) {
      return end;
    }
    if (!isEntryBlock(block, end, later)) break;
    for (const key of blockKeys(block)) seen.add(key);
    end += 1;
  }
  if (end === blocks.length) {
    // A list at the back of the book (a French "TABLE DES MATIÈRES") names headings before it;
    // short lines to the end naming nothing before them are verse.
    const back = [...seen].some((key) => (earlier.get(key) ?? at) < at);
    return back ? end : at;
  }
  // Prose ended the list. Its paragraphs up to the last one named again further on are entries
  // (Moby-Dick's "Epilogue" before a transcriber's note); after that, a heading group is the
  // prose's heading (a PREFACE the list does not name).
  const named = findLastIndex(
    blocks,
    at + 1,
    end,
    (block) => blockKeys(block).some((key) => (later.get(key) ?? -1) >= end),
  );
  if (named === end - 1) return end;
  const start = bodyStart(blocks, named === -1 ? at + 1 : named + 1, end);
  return start <= at + 1 && blocks[at].length === 1 ? at : start;
}

/** Whether a paragraph that is not an entry comes within a heading group's reach after `at`. */
function bodyFollows(blocks: Block[], at: number, later: ReadonlyMap<string, number>): boolean {
  const last = Math.min(blocks.length, at + 1 + MAX_HEADING_GROUP);
  for (let index = at + 1; index < last; index += 1) {
    if (!isEntryBlock(blocks[index], index, later)) return true;
  }
  return false;
}

/**
 * A paragraph whose text (or first line) is one of the entries in `seen`, or a styled heading an
 * entry starts with (`CHAPTER I` over its title, listed as `CHAPTER I. Jonathan Harker's Journal`).
 */
function repeatsEntry(block: Block, seen: ReadonlySet<string>): boolean {
  if (!isShort(block)) return false;
  const key = entryKey(block.join(" "));
  if (seen.has(key) || seen.has(entryKey(block[0]))) return true;
  // Asked of every styled paragraph in the list, each time over the entries so far: bounded, so a
  // list of 200,000 headings stays linear.
  if (styledHeadingOf(block) === null || key === "" || seen.size > MAX_PREFIX_ENTRIES) return false;
  for (const entry of seen) if (entry.startsWith(key)) return true;
  return false;
}

/**
 * A paragraph of a contents list: a single-spaced list of headings, a heading wrapped onto the
 * next lines (`CHAPTER 56. Of the Less Erroneous Pictures of Whales, and the True` / `Pictures
 * of Whaling Scenes.`), or lines that each read as an entry (`isEntryLine`), however many (a
 * single-spaced list of titles).
 */
function isEntryBlock(block: Block, index: number, later: ReadonlyMap<string, number>): boolean {
  if (isContentsList(block)) return true;
  if (styledHeadingOf(block)?.lineCount === block.length) return true;
  return block.every((line) => isEntryLine(line, index, later));
}

/**
 * A line that reads as a contents entry: short, and with its page number left out, ending no
 * sentence ("The Start"), or a page-numbered entry (`THE DEPARTURE   3.`), or a heading line
 * (`CHAPTER 43. Hark!`), or a title in capitals (`OP ZEE.`); or ending in a full stop as one-word
 * labels (`Bladz.`) do, or named again by a paragraph further on (`EXTRACTS (Supplied by …).`,
 * with no comma or semicolon). A sentence ("Transcriber note: … a printed copy.") or a line
 * ending in `:` or `,` is not one.
 */
function isEntryLine(line: string, index: number, later: ReadonlyMap<string, number>): boolean {
  if (line.length > MAX_HEADING_CHARS) return false;
  const text = line.replace(PAGE_NUMBER, "");
  if (text !== line && /\p{L}/u.test(text)) return true;
  if (!/[.!?…"”’»:;,]$/u.test(text)) return true;
  const kind = classifyLine(text);
  if ((kind !== null && kind !== "bare") || !/\p{Ll}/u.test(text)) return true;
  // A sentence repeated word for word is no title: one named again has no comma or semicolon.
  return /\.$/u.test(text) && (/^\S+\.$/u.test(text) ||
    (!/[,;]/u.test(text) && (later.get(entryKey(text)) ?? -1) > index));
}

/** The keys a contents paragraph names: each line's, and the whole paragraph's (an entry wraps). */
function blockKeys(block: Block): string[] {
  const keys = new Set<string>();
  for (const line of block) addKey(keys, line);
  if (block.length > 1 && block.length <= MAX_HEADING_GROUP) addKey(keys, block.join(" "));
  return [...keys];
}

/** Add a line's key, when it names something ("* * *" and bare numbers do not). */
function addKey(keys: Set<string>, text: string): void {
  const key = entryKey(text);
  if (/\p{L}{2}/u.test(key)) keys.add(key);
}

/** Record the entries of the list `[at, end)` (its `CONTENTS` paragraph first). */
function addEntries(blocks: Block[], at: number, end: number, entries: Set<string>): void {
  for (const line of blocks[at].slice(1)) addKey(entries, line);
  for (let index = at + 1; index < end; index += 1) {
    for (const key of blockKeys(blocks[index])) entries.add(key);
  }
}

/** Each short paragraph's key (see `entryKey`), mapped to the first or last index it stands at. */
function shortIndex(blocks: Block[], which: "first" | "last"): Map<string, number> {
  const indexes = new Map<string, number>();
  for (const [index, block] of blocks.entries()) {
    if (!isShort(block)) continue;
    const key = entryKey(block.join(" "));
    if (which === "last" || !indexes.has(key)) indexes.set(key, index);
  }
  return indexes;
}
