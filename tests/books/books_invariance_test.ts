/**
 * Metamorphic tests over every book the project keeps (the regression set of
 * `tests/fixtures/books/`, and the cases of `tests/fixtures/cases/`): the same book saved
 * differently must give the same book. Each book's bytes are transformed in memory and parsed
 * in process (`parseBook`), and the result compared with the original's:
 * - line ends `\r\n` and a lone `\r` (classic Mac OS) for `\n`;
 * - a byte-order mark (UTF-8), UTF-16 LE and BE (with their marks);
 * - Windows-1252 where the book's text fits it: guessed for plain text and Markdown, declared
 *   (`<meta charset>`, the XML prolog) for HTML and an EPUB's files;
 * - Unicode NFD for NFC;
 * - white space at the ends of lines; for plain text and HTML (and XHTML), tab and space
 *   indentation (not Markdown, where indentation makes code).
 * An EPUB is transformed file by file (its XHTML, package document and NCX) and zipped again.
 * Equal means: title, author, language, direction, licence, resources' paths, and every chapter's
 * title and html; for the white-space transformations, html and licence compared with runs of
 * white space made one (a browser shows them alike). Warnings may differ only by an
 * `encoding_guessed` one.
 *
 * @module
 */
import assert from "node:assert/strict";
import { extname } from "node:path";
import { gunzipSync, strToU8, unzipSync, type Zippable, zipSync } from "fflate";
import type { BookFormat, ExtractedBook } from "../../books/extract.ts";
import { decodeBookBytes, type DecodeKind } from "../../books/decode.ts";
import { parseBook } from "../../books/extract_in_process.ts";
import { readSet, SET_DIR } from "../../bench/_regression_set.ts";
import { brokenLinks } from "../../bench/_book_links.ts";

const CASES = new URL("../fixtures/cases/", import.meta.url);

const FORMATS: Readonly<Record<string, BookFormat>> = {
  ".txt": "text",
  ".md": "markdown",
  ".html": "html",
  ".htm": "html",
  ".xhtml": "html",
  ".epub": "epub",
};

/** Text after a transformation, and how to write it back as bytes. */
interface Written {
  text: string;
  encoding: "utf-8" | "utf-8-bom" | "utf-16le" | "utf-16be" | "windows-1252";
}

/** One way of saving the same book: on a file's decoded text, `null` when it does not apply. */
interface Transformation {
  name: string;
  /** Compare html and licence with white space collapsed. */
  whiteSpace?: boolean;
  apply(text: string, kind: DecodeKind, original: Written["encoding"]): Written | null;
}

const TRANSFORMATIONS: Transformation[] = [
  { name: "CRLF", apply: (text, _, encoding) => ({ text: text.replace(/\n/g, "\r\n"), encoding }) },
  { name: "CR", apply: (text, _, encoding) => ({ text: text.replace(/\n/g, "\r"), encoding }) },
  { name: "UTF-8 BOM", apply: (text) => ({ text, encoding: "utf-8-bom" }) },
  { name: "UTF-16LE", apply: (text) => ({ text, encoding: "utf-16le" }) },
  { name: "UTF-16BE", apply: (text) => ({ text, encoding: "utf-16be" }) },
  {
    name: "Windows-1252",
    apply: (text, kind) => {
      if (!fitsWindows1252(text)) return null;
      return {
        text: kind === "text" || kind === "markdown" ? text : declare1252(text, kind),
        encoding: "windows-1252",
      };
    },
  },
  {
    name: "NFD",
    apply: (text, _, encoding) => {
      // Windows-1252 cannot write a combining accent: UTF-8, marked, whatever a file declares.
      const nfd = text.normalize("NFD");
      return { text: nfd, encoding: encoding === "windows-1252" ? "utf-8-bom" : encoding };
    },
  },
  {
    name: "trailing white space",
    whiteSpace: true,
    // Markdown: one space, which is no hard line break (two or more are).
    apply: (text, kind, encoding) => ({
      text: text.replace(/\n/g, kind === "markdown" ? " \n" : " \t \n"),
      encoding,
    }),
  },
  {
    name: "tab indentation",
    whiteSpace: true,
    apply: (text, kind, encoding) =>
      kind === "markdown" ? null : { text: text.replace(/^/gm, "\t"), encoding },
  },
  {
    name: "space indentation",
    whiteSpace: true,
    apply: (text, kind, encoding) =>
      kind === "markdown" ? null : { text: text.replace(/^(?=.)/gm, "    "), encoding },
  },
];

/** Characters Windows-1252 can write, by code point → byte. */
const WINDOWS_1252 = new Map<string, number>();
{
  const decoder = new TextDecoder("windows-1252");
  for (let byte = 0; byte < 256; byte += 1) {
    WINDOWS_1252.set(decoder.decode(Uint8Array.of(byte)), byte);
  }
}

function fitsWindows1252(text: string): boolean {
  for (const char of text) if (!WINDOWS_1252.has(char)) return false;
  return true;
}

/** The text with its encoding declared as Windows-1252: the `<meta charset>` or XML prolog. */
function declare1252(text: string, kind: DecodeKind): string {
  const prolog = /^(\s*<\?xml[^>]*?\bencoding\s*=\s*["'])[^"']+/i;
  if (prolog.test(text)) return text.replace(prolog, "$1windows-1252");
  if (kind === "xml") return `<?xml version="1.0" encoding="windows-1252"?>${text}`;
  const meta = /(<meta\b[^>]*?\bcharset\s*=\s*["']?\s*)[^\s"'/>;]+/i;
  if (meta.test(text.slice(0, 1024))) return text.replace(meta, "$1windows-1252");
  return `<meta charset="windows-1252">${text}`;
}

function encode(written: Written): Uint8Array {
  const { text, encoding } = written;
  switch (encoding) {
    case "utf-8":
      return strToU8(text);
    case "utf-8-bom": {
      const body = strToU8(text);
      const bytes = new Uint8Array(body.length + 3);
      bytes.set([0xef, 0xbb, 0xbf]);
      bytes.set(body, 3);
      return bytes;
    }
    case "utf-16le":
    case "utf-16be": {
      const little = encoding === "utf-16le";
      const bytes = new Uint8Array(2 + text.length * 2);
      const view = new DataView(bytes.buffer);
      view.setUint16(0, 0xfeff, little);
      for (let index = 0; index < text.length; index += 1) {
        view.setUint16(2 + index * 2, text.charCodeAt(index), little);
      }
      return bytes;
    }
    case "windows-1252":
      return Uint8Array.from(text, (char) => WINDOWS_1252.get(char)!);
  }
}

/** A file's text and the encoding it was read in, as a transformation starts from it. */
function read(bytes: Uint8Array, kind: DecodeKind): Written {
  const decoded = decodeBookBytes(bytes, kind);
  const bom = bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf;
  const encoding: Written["encoding"] = decoded.encoding === "windows-1252"
    ? "windows-1252"
    : decoded.encoding === "utf-16le" || decoded.encoding === "utf-16be"
    ? decoded.encoding
    : bom
    ? "utf-8-bom"
    : "utf-8";
  return { text: decoded.text, encoding };
}

/** The book's bytes saved the transformation's way; `null` when it changes nothing or fits not. */
function transform(
  bytes: Uint8Array,
  format: BookFormat,
  transformation: Transformation,
): Uint8Array | null {
  if (format !== "epub") {
    const original = read(bytes, format);
    const written = transformation.apply(original.text, format, original.encoding);
    return written === null ? null : encode(written);
  }
  const files = unzipSync(bytes);
  const out: Zippable = { mimetype: [strToU8("application/epub+zip"), { level: 0 }] };
  let changed = false;
  for (const [name, content] of Object.entries(files)) {
    if (name === "mimetype") continue;
    const kind = /\.(?:x?html?)$/i.test(name)
      ? "html"
      : /\.(?:opf|ncx|xml)$/i.test(name)
      ? "xml"
      : null;
    const written = kind === null
      ? null
      : transformation.apply(read(content, kind).text, kind, read(content, kind).encoding);
    if (written === null) {
      out[name] = content;
      continue;
    }
    out[name] = encode(written);
    changed = true;
  }
  return changed ? zipSync(out, { level: 1 }) : null;
}

/** What must stay the same; with `whiteSpace`, html and licence with white space made one. */
function essence(book: ExtractedBook, whiteSpace: boolean): unknown {
  const squeeze = (html: string): string =>
    whiteSpace ? html.replace(/\s+/g, " ").replace(/ ?(<[^>]*>) ?/g, "$1").trim() : html;
  return {
    title: book.title,
    author: book.author,
    language: book.language ?? null,
    direction: book.direction ?? null,
    licence: book.licence == null ? null : squeeze(book.licence),
    resources: (book.resources ?? []).map((resource) => resource.path),
    chapters: book.chapters.map((chapter) => ({
      title: chapter.title,
      html: squeeze(chapter.html),
    })),
    warnings: (book.warnings ?? []).filter((warning) => warning.kind !== "encoding_guessed")
      .map((warning) => warning.kind),
  };
}

/** Every book: the regression set's (decompressed) and the cases'. */
async function allBooks(): Promise<{ name: string; bytes: Uint8Array }[]> {
  const books: { name: string; bytes: Uint8Array }[] = [];
  for (const book of await readSet()) {
    const bytes = await Deno.readFile(new URL(book.file, SET_DIR));
    books.push({
      name: book.file.replace(/\.gz$/, ""),
      bytes: book.file.endsWith(".gz") ? gunzipSync(bytes) : bytes,
    });
  }
  for await (const entry of Deno.readDir(CASES)) {
    if (FORMATS[extname(entry.name).toLowerCase()] === undefined) continue;
    books.push({ name: entry.name, bytes: await Deno.readFile(new URL(entry.name, CASES)) });
  }
  return books.sort((a, b) => a.name.localeCompare(b.name));
}

const signal = new AbortController().signal;

for (const { name, bytes } of await allBooks()) {
  const format = FORMATS[extname(name).toLowerCase()];
  Deno.test(`${name}: every way of saving it gives the same book`, () => {
    const original = parseBook(format, bytes, name, signal);
    // The original's links land: the invariance is of a book that reads right.
    assert.deepEqual(brokenLinks(original), [], name);
    let applied = 0;
    for (const transformation of TRANSFORMATIONS) {
      const changed = transform(bytes, format, transformation);
      if (changed === null) continue;
      applied += 1;
      const book = parseBook(format, changed, name, signal);
      const whiteSpace = transformation.whiteSpace ?? false;
      assert.deepEqual(
        essence(book, whiteSpace),
        essence(original, whiteSpace),
        `${name} saved with ${transformation.name}`,
      );
    }
    // Line ends, the marks and UTF-16, NFD and trailing white space apply to every book.
    assert.ok(applied >= 7, `${name}: only ${applied} transformations applied`);
  });
}
