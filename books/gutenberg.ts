/**
 * The Project Gutenberg frame around a book's text: the header (licence notice, `Title:` and
 * `Author:` lines) before a `*** START OF … ***` marker and the licence after `*** END OF … ***`.
 * Issue 10: "Gutenberg header and licence text inside the first and last chapters". Plain text
 * and HTML books both use the markers and the header reading here.
 *
 * @module
 */
import { collapseWhitespace } from "./book.ts";

/** What the frame said about the book, and the text inside it. */
export interface GutenbergFrame {
  /** The text between the markers; the whole text when there is no frame. */
  body: string;
  /** `Title:` (with its indented continuation lines) or the "eBook of X, by Y" line's X. */
  title: string | null;
  /** `Author:`, or the "eBook of X, by Y" line's Y. */
  author: string | null;
  /** Whether a start or end marker was found. */
  framed: boolean;
}

/**
 * A start marker line, in the wordings used since the 1990s: `*** START OF THE PROJECT GUTENBERG
 * EBOOK X ***`, `***START OF THIS PROJECT GUTENBERG EBOOK X***`, and the old small-print end line
 * `*END*THE SMALL PRINT! FOR PUBLIC DOMAIN ETEXTS*…*END*`.
 */
export const GUTENBERG_START =
  /^[ \t]*\*{1,3}[ \t]*(?:START OF (?:THE |THIS )?PROJECT GUTENBERG|END\*THE SMALL PRINT)[^\n]*$/im;

/**
 * An end marker line: `*** END OF THE PROJECT GUTENBERG EBOOK X ***` and its variants, or the
 * `End of the Project Gutenberg EBook of X` / `End of Project Gutenberg's X` line older files put
 * before it (the licence follows either).
 */
export const GUTENBERG_END =
  /^[ \t]*(?:\*{1,3}[ \t]*END OF (?:THE |THIS )?PROJECT GUTENBERG|End of (?:the )?Project Gutenberg)[^\n]*$/im;

/** `Produced by …` credits right after the start marker: transcriber furniture, not the book. */
const CREDITS =
  /^[ \t]*(?:Produced by|E-?text prepared by|Transcribed from)\b[^]*?(?:\n[ \t]*\n|$)/i;

/** A `Title:` first line shorter than this, in characters, is a title over its subtitle. */
const SUBTITLE_BELOW_CHARS = 50;

/**
 * Cut a text at the Project Gutenberg markers and read the header's title and author.
 *
 * @param text the whole decoded file (line ends as found).
 * @returns the text inside the frame (trimmed of the transcriber's "Produced by" credits) with the
 *   header's title and author; the text unchanged and `framed: false` when there is no marker.
 */
export function stripGutenbergFrame(text: string): GutenbergFrame {
  const start = GUTENBERG_START.exec(text);
  const from = start === null ? 0 : start.index + start[0].length;
  const end = GUTENBERG_END.exec(text.slice(from));
  if (start === null && end === null) {
    return { body: text, title: null, author: null, framed: false };
  }
  const header = start === null ? "" : text.slice(0, start.index);
  const body = text.slice(from, end === null ? text.length : from + end.index)
    .replace(/^\s+/, "").replace(CREDITS, "");
  return { body, ...readGutenbergHeader(header), framed: true };
}

/**
 * Read the title and author from a Project Gutenberg header: `Title:` / `Author:` fields (a field
 * wraps onto indented lines), else the first line, "The Project Gutenberg eBook of X, by Y".
 *
 * @param header the text before the start marker.
 * @returns the title and author found, each `null` when the header has none.
 */
export function readGutenbergHeader(
  header: string,
): { title: string | null; author: string | null } {
  const field = (name: string): string | null => {
    const match = new RegExp(`^${name}:[ \\t]*(.+(?:\\r?\\n[ \\t]+\\S.*)*)`, "im").exec(header);
    if (match === null) return null;
    const [first, ...more] = match[1].split(/\r?\n/).map(collapseWhitespace);
    if (more.length === 0) return first || null;
    // A short first line over an indented one is a title and its subtitle ("A Christmas Carol" /
    // "A Ghost Story of Christmas"); a long one wrapped.
    return `${first}${first.length < SUBTITLE_BELOW_CHARS ? ": " : " "}${more.join(" ")}`;
  };
  const line = /Project Gutenberg(?:'s|’s|(?: e-?book| etext),? of)[ \t]+([^\n]+)/i
    .exec(header);
  let title = field("Title");
  let author = field("Author");
  if (line !== null) {
    const [named, by] = collapseWhitespace(line[1]).split(/,? by (?=\S)/i, 2);
    title ??= named.replace(/[.,]$/, "") || null;
    author ??= by?.replace(/[.]$/, "") || null;
  }
  return { title, author };
}
