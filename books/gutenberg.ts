/**
 * The Project Gutenberg frame around a book's text: the header (licence notice, `Title:` and
 * `Author:` lines) before a `*** START OF … ***` marker and the licence after `*** END OF … ***`.
 * Neither the header nor the licence ends up inside the first or last chapter. Plain text
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
  /**
   * The licence the frame carries: the text from the end marker on (the Project Gutenberg
   * License), else the header's notice; `null` when there is no frame. See `licenceText`.
   */
  licence: string | null;
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
 * @param text the whole decoded file (`\n` line ends: `books/decode.ts`).
 * @returns the text inside the frame (trimmed of the transcriber's "Produced by" credits) with the
 *   header's title and author; the text unchanged and `framed: false` when there is no marker.
 */
export function stripGutenbergFrame(text: string): GutenbergFrame {
  const start = GUTENBERG_START.exec(text);
  const from = start === null ? 0 : start.index + start[0].length;
  const end = GUTENBERG_END.exec(text.slice(from));
  if (start === null && end === null) {
    return { body: text, title: null, author: null, framed: false, licence: null };
  }
  const header = start === null ? "" : text.slice(0, start.index);
  const body = text.slice(from, end === null ? text.length : from + end.index)
    .replace(/^\s+/, "").replace(CREDITS, "");
  const footer = end === null ? "" : text.slice(from + end.index);
  return {
    body,
    ...readGutenbergHeader(header),
    framed: true,
    licence: licenceText(footer) ?? licenceText(header),
  };
}

/**
 * The licence text of a Project Gutenberg frame as kept with the edition: its lines trimmed, runs
 * of blank lines made one, so the same licence reads the same whatever the file's white space.
 *
 * @param text the frame's text (after the end marker, or the header), `\n` line ends.
 * @returns the text, or `null` when it is blank.
 */
export function licenceText(text: string): string | null {
  const lines = text.split("\n").map((line) => line.trim());
  const kept = lines.join("\n").replace(/\n{3,}/g, "\n\n").trim();
  return kept === "" ? null : kept;
}

/**
 * A title or name as the header gives it, less the punctuation that only joined it to what
 * followed: "Frankenstein;" over its subtitle line, "Lewis Carroll." A full stop after an
 * abbreviation ("Jr.", "St.", an initial) is kept.
 *
 * @param value a header field, whitespace collapsed.
 * @returns the value without trailing `,`, `;`, `:` and sentence-ending `.`; `null` when empty.
 */
export function cleanHeaderField(value: string): string | null {
  let cleaned = value.replace(/[\s,;:]+$/u, "");
  if (/\.$/.test(cleaned) && !/(?:^|[\s.])(?:\p{Lu}|Jr|Sr|St|Dr|Mr|Mrs|Co|Esq)\.$/u.test(cleaned)) {
    cleaned = cleaned.slice(0, -1).replace(/[\s,;:]+$/u, "");
  }
  return cleaned === "" ? null : cleaned;
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
  const lines = header.split("\n");
  const field = (name: string): string | null => {
    const pattern = new RegExp(`^([ \\t]*)${name}:[ \\t]*(\\S.*)$`, "i");
    for (const [index, line] of lines.entries()) {
      const match = pattern.exec(line);
      if (match === null) continue;
      // A field wraps onto the lines indented deeper than its own, whatever the file's indent.
      const indent = match[1].length;
      const more: string[] = [];
      for (const next of lines.slice(index + 1)) {
        const lead = /^[ \t]*/.exec(next)![0].length;
        if (next.trim() === "" || lead <= indent) break;
        more.push(collapseWhitespace(next));
      }
      const first = collapseWhitespace(match[2]);
      if (more.length === 0) return cleanHeaderField(first);
      // A short first line over an indented one is a title and its subtitle ("A Christmas Carol"
      // / "A Ghost Story of Christmas"), unless its own punctuation joins them ("Frankenstein;");
      // a long one wrapped.
      const subtitle = first.length < SUBTITLE_BELOW_CHARS && !/[,;:]$/.test(first);
      return cleanHeaderField(`${first}${subtitle ? ": " : " "}${more.join(" ")}`);
    }
    return null;
  };
  const line = /Project Gutenberg(?:'s|’s|(?: e-?book| etext),? of)[ \t]+([^\n]+)/i
    .exec(header);
  let title = field("Title");
  let author = field("Author");
  if (line !== null) {
    const [named, by] = collapseWhitespace(line[1]).split(/,? by (?=\S)/i, 2);
    title ??= cleanHeaderField(named);
    author ??= by === undefined ? null : cleanHeaderField(by);
  }
  return { title, author };
}
