/**
 * Turning a book file's bytes into text: the encoding it declares (byte-order mark, XML prolog,
 * `<meta charset>`), else UTF-8 when the bytes are valid UTF-8, else UTF-16 without a mark when
 * its zero bytes show it, else a guess by `chardet` — and refusing bytes that are binary data, not
 * text. Shared by the text formats and the EPUB reader (each XHTML document of an EPUB may declare
 * its own encoding in its XML prolog). A Latin-1 text, or HTML that declares its charset, is
 * read as such, never refused as "not valid UTF-8".
 *
 * @module
 */
import { analyse } from "chardet";

/**
 * What the bytes are: plain text and Markdown declare nothing but a byte-order mark; HTML and XML
 * may declare their encoding inside. Only plain text is refused for a U+0000.
 */
export type DecodeKind = "text" | "markdown" | "html" | "xml";

/** Decoded text and how its encoding was found. */
export interface DecodedText {
  /**
   * The text, without a byte-order mark, its line ends all `\n` (a `\r\n` or lone `\r` read as
   * one) and in Unicode Normalization Form C: the same book saved on Windows, on an old Mac, or
   * by a tool that decomposes accents reads the same to every parser after this.
   */
  text: string;
  /** WHATWG name of the encoding used, e.g. `"utf-8"`, `"windows-1252"`, `"utf-16le"`. */
  encoding: string;
  /** `null` when the encoding was declared or the bytes are valid UTF-8; else why it is a guess. */
  warning: string | null;
}

/** Thrown when the bytes are not text in any encoding: the caller names the file. */
export class BinaryDataError extends Error {
  override name = "BinaryDataError";
}

/** How many leading bytes are searched for an XML or `<meta>` declaration (as the HTML spec). */
const PRESCAN_BYTES = 1024;

/** How many bytes the UTF-16 and binary tests look at, from the start. */
const SAMPLE_BYTES = 64 * 1024;

/**
 * How many bytes `chardet` is given: the lines that hold non-ASCII bytes, where a legacy
 * encoding shows itself. 16 KiB of them gave the same guess as 64 KiB from the start on every
 * book tried (English, Spanish and French in Windows-1252 and ISO-8859-1/15, Arabic, Hebrew and
 * Japanese in their legacy encodings), in a third of the time: `chardet` was a quarter of a
 * Windows-1252 novel's extraction.
 */
const DETECT_BYTES = 16 * 1024;

/**
 * Share of C0 control characters (other than tab, line feed, form feed, carriage return and
 * escape) above which decoded text is taken for binary data. Real books have none; a stray one or
 * two (a page break pasted as ^L, an old Gutenberg ^Z) must not refuse a book.
 */
const MAX_CONTROL_SHARE = 0.01;

/** Tab, line feed, form feed, carriage return, escape: seen in real text files. */
const ALLOWED_CONTROLS: ReadonlySet<number> = new Set([0x09, 0x0a, 0x0c, 0x0d, 0x1b]);

/**
 * Decode a book file's bytes, honouring what the file declares.
 *
 * Order: a byte-order mark (UTF-8, UTF-16LE/BE) wins; for `"xml"` and `"html"`, then the
 * `encoding` of an XML prolog (also found in UTF-16 without a mark, by its `<?` bytes) or, for
 * `"html"`, a `<meta charset>` / `<meta http-equiv="Content-Type" content="…; charset=…">` in the
 * first 1024 bytes. A declared UTF-16 in an ASCII-readable prolog or `<meta>` is read as UTF-8, as
 * browsers do: the declaration could not be read so if it were true. Bytes the declared encoding
 * cannot decode (an unknown label, a UTF-8 or Shift_JIS file that is not valid in it) are read as
 * UTF-8 when they are valid UTF-8, else detected, with a warning either way. Undeclared: valid
 * UTF-8 is UTF-8; text whose every other byte is mostly zero is UTF-16; anything else is a guess
 * by `chardet` (a legacy single-byte or CJK encoding), with a warning. The EPUB reader decodes
 * every XML and XHTML file of the book here too.
 *
 * @param bytes the file's bytes.
 * @param kind what the bytes are, for the declarations looked for.
 * @returns the text (no byte-order mark, `\n` line ends, NFC), the encoding's WHATWG name and a
 *   warning when guessed.
 * @throws BinaryDataError when the bytes decode to text holding more than 1 % control characters,
 *   or (`"text"`) any U+0000: a binary file, not a book.
 */
export function decodeBookBytes(bytes: Uint8Array, kind: DecodeKind): DecodedText {
  const bom = sniffBom(bytes);
  if (bom !== null) {
    return checked(decodeAs(bytes.subarray(bom.length), bom.encoding), bom.encoding, null, kind);
  }
  const declared = kind === "html" || kind === "xml" ? sniffDeclaration(bytes, kind) : null;
  let warning: string | null = null;
  let utf8Tried = false;
  if (declared !== null) {
    const encoding = canonical(declared);
    if (encoding === null) {
      warning = `unknown declared encoding "${declared}"`;
    } else {
      const text = tryDecode(bytes, encoding);
      if (text !== null) return checked(text, encoding, null, kind);
      warning = `declared encoding "${declared}" does not match the bytes`;
      utf8Tried = encoding === "utf-8";
    }
  }
  if (!utf8Tried) {
    const text = tryDecode(bytes, "utf-8");
    if (text !== null) {
      return checked(
        text,
        "utf-8",
        warning === null ? null : `encoding guessed as "utf-8" (${warning})`,
        kind,
      );
    }
  }
  const utf16 = sniffUtf16(bytes.subarray(0, SAMPLE_BYTES));
  const encoding = utf16 ?? detect(detectionSample(bytes));
  const reason = warning === null ? "no encoding declared" : warning;
  return checked(
    decodeAs(bytes, encoding),
    encoding,
    `encoding guessed as "${encoding}" (${reason})`,
    kind,
  );
}

/** Byte-order marks, longest first. */
function sniffBom(bytes: Uint8Array): { encoding: string; length: number } | null {
  if (bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) {
    return { encoding: "utf-8", length: 3 };
  }
  if (bytes[0] === 0xff && bytes[1] === 0xfe) return { encoding: "utf-16le", length: 2 };
  if (bytes[0] === 0xfe && bytes[1] === 0xff) return { encoding: "utf-16be", length: 2 };
  return null;
}

/**
 * The encoding an XML prolog or (for HTML) a `<meta>` declares in the first bytes, read as
 * Latin-1 so any ASCII-compatible encoding shows its declaration. An XML prolog in UTF-16 without
 * a mark starts `3C 00 3F 00` (LE) or `00 3C 00 3F` (BE): its own bytes say so.
 */
function sniffDeclaration(bytes: Uint8Array, kind: DecodeKind): string | null {
  if (bytes[0] === 0x3c && bytes[1] === 0x00 && bytes[2] === 0x3f && bytes[3] === 0x00) {
    return "utf-16le";
  }
  if (bytes[0] === 0x00 && bytes[1] === 0x3c && bytes[2] === 0x00 && bytes[3] === 0x3f) {
    return "utf-16be";
  }
  const head = new TextDecoder("latin1").decode(bytes.subarray(0, PRESCAN_BYTES));
  const prolog = /^\s*<\?xml[^>]*?\bencoding\s*=\s*["']([^"']+)["']/i.exec(head);
  const meta = prolog === null && kind === "html"
    ? /<meta\b[^>]*?\bcharset\s*=\s*["']?\s*([^\s"'/>;]+)/i.exec(head)
    : null;
  const label = (prolog ?? meta)?.[1].trim();
  if (label === undefined) return null;
  // A prolog or <meta> readable as ASCII cannot be in UTF-16: the HTML spec reads such a file as
  // UTF-8, and an XML file that is really UTF-16 shows it in its first bytes (above).
  return /^utf-?16/i.test(label) ? "utf-8" : label;
}

/** The WHATWG name for a label, or `null` when TextDecoder does not know it. */
function canonical(label: string): string | null {
  try {
    return new TextDecoder(label).encoding;
  } catch {
    return null;
  }
}

/** The bytes decoded, or `null` when they are not valid in the encoding. */
function tryDecode(bytes: Uint8Array, encoding: string): string | null {
  try {
    return new TextDecoder(encoding, { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    return null;
  }
}

function decodeAs(bytes: Uint8Array, encoding: string): string {
  // Not fatal: a declared or guessed legacy encoding with a stray bad byte still yields the book,
  // the bad byte shown as U+FFFD.
  return new TextDecoder(encoding, { ignoreBOM: true }).decode(bytes);
}

/**
 * UTF-16 without a byte-order mark: in text that is mostly Latin script, one byte of each pair is
 * zero. Seen on most pairs, and on the same side, that is UTF-16; a binary file's zeros fall on
 * both sides.
 */
function sniffUtf16(sample: Uint8Array): string | null {
  const pairs = Math.floor(sample.length / 2);
  if (pairs < 2) return null;
  let evenZeros = 0;
  let oddZeros = 0;
  for (let index = 0; index + 1 < sample.length; index += 2) {
    if (sample[index] === 0) evenZeros += 1;
    if (sample[index + 1] === 0) oddZeros += 1;
  }
  if (oddZeros > pairs * 0.4 && evenZeros < pairs * 0.02) return "utf-16le";
  if (evenZeros > pairs * 0.4 && oddZeros < pairs * 0.02) return "utf-16be";
  return null;
}

/**
 * What `chardet` reads: the lines (ended by LF or CR) holding a byte at or above 0x80, from
 * anywhere in the file, up to `DETECT_BYTES`; the first `SAMPLE_BYTES` when no line has one (a
 * 7-bit encoding such as ISO-2022-JP).
 */
function detectionSample(bytes: Uint8Array): Uint8Array {
  const sample = new Uint8Array(DETECT_BYTES);
  let length = 0;
  let start = 0;
  let high = false;
  for (let index = 0; index <= bytes.length && length < DETECT_BYTES; index += 1) {
    const byte = bytes[index];
    if (index === bytes.length || byte === 0x0a || byte === 0x0d) {
      if (high) {
        const line = bytes.subarray(start, Math.min(index + 1, bytes.length));
        const taken = Math.min(line.length, DETECT_BYTES - length);
        sample.set(line.subarray(0, taken), length);
        length += taken;
      }
      start = index + 1;
      high = false;
    } else if (byte >= 0x80) {
      high = true;
    }
  }
  return length === 0 ? bytes.subarray(0, SAMPLE_BYTES) : sample.subarray(0, length);
}

/** The most confident `chardet` guess that TextDecoder can decode; windows-1252 otherwise. */
function detect(sample: Uint8Array): string {
  for (const match of analyse(sample)) {
    const encoding = canonical(match.name);
    // chardet names UTF-8 for ASCII-with-errors samples; those bytes are known not to be UTF-8.
    if (encoding !== null && encoding !== "utf-8" && !encoding.startsWith("utf-16")) {
      return encoding;
    }
  }
  return "windows-1252";
}

/**
 * Line ends and Unicode form made one, once, where text is decoded, so no parser has its own
 * rule: `\r\n` (Windows, and Project Gutenberg's mirrors) and a lone `\r` (classic Mac OS) become
 * `\n`, as the HTML and XML specs do on input; composed and decomposed accents become NFC, the form
 * the W3C Character Model asks for in content (a decomposed `é` and a composed one must name the
 * same `id`, match the same heading word, and count as the same letter).
 *
 * @param text decoded text.
 * @returns the text with `\n` line ends, in NFC.
 */
export function normalizeText(text: string): string {
  const lines = text.includes("\r") ? text.replace(/\r\n?/g, "\n") : text;
  return lines.normalize("NFC");
}

/** The decoded text, unless it is really binary data. */
function checked(
  text: string,
  encoding: string,
  warning: string | null,
  kind: DecodeKind,
): DecodedText {
  // Markup may hold a stray U+0000, which HTML parsers replace; plain text holding one is binary.
  if (kind === "text" && text.includes("\0")) {
    throw new BinaryDataError("the file contains NUL bytes: it is binary data, not text");
  }
  const sample = text.slice(0, SAMPLE_BYTES);
  let controls = 0;
  for (let index = 0; index < sample.length; index += 1) {
    const code = sample.charCodeAt(index);
    if (code > 0 && code < 0x20 && !ALLOWED_CONTROLS.has(code)) controls += 1;
  }
  if (controls > sample.length * MAX_CONTROL_SHARE) {
    throw new BinaryDataError("the file holds control characters: it is binary data, not text");
  }
  return { text: normalizeText(text), encoding, warning };
}
