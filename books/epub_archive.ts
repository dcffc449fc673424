/**
 * An EPUB's ZIP archive as real books are zipped, and the decoding of the XML and XHTML read from
 * it. Entry names are looked up the way a reading system finds them (issue 10, "Archives as real
 * books are zipped"): backslashes are separators, a UTF-8 name stored without the ZIP's UTF-8 flag
 * is read as UTF-8, names compare after Unicode NFC normalisation, and case only when nothing
 * matches exactly. Sizes are bounded before anything is inflated (a ZIP bomb guard).
 *
 * @module
 */
import { type UnzipFileInfo, unzipSync } from "fflate";

/** Largest unpacked size of one entry read from an EPUB, in bytes (64 MiB). */
export const MAX_ENTRY_BYTES = 64 * 1024 * 1024;

/** Largest unpacked size of all entries read from one EPUB, in bytes (256 MiB). */
export const MAX_UNPACKED_BYTES = 256 * 1024 * 1024;

/** Builds the error for a broken archive; `reason` is lower case, values quoted. */
export type Fail = (reason: string, cause?: unknown) => Error;

/** An opened archive: its entries by canonical name, inflated on demand. */
export interface Archive {
  /**
   * The canonical name of the entry a path names (NFC, `/` separators), or `null` when there is
   * none; an exact match wins over one that differs only in case.
   */
  find(path: string): string | null;
  /** Unpack entries by canonical name (from `find`), in one pass over the archive. */
  unpack(names: Iterable<string>): Map<string, Uint8Array>;
}

/**
 * Open a ZIP archive: read its central directory without inflating anything.
 *
 * @param bytes the file's bytes.
 * @param fail builds the error thrown.
 * @returns the archive.
 * @throws what `fail` builds when the bytes are not a ZIP archive (or it is truncated), when an
 *   entry to unpack is over `MAX_ENTRY_BYTES`, the entries unpacked so far are over
 *   `MAX_UNPACKED_BYTES`, or inflating fails.
 */
export function openArchive(bytes: Uint8Array, fail: Fail): Archive {
  /** canonical name → fflate's name (what its filter sees) and declared size. */
  const entries = new Map<string, { raw: string; size: number }>();
  const folded = new Map<string, string>();
  try {
    // A filter that takes nothing walks the central directory without inflating anything; a
    // truncated archive has lost its end-of-central-directory record and fails here.
    unzipSync(bytes, {
      filter: (file: UnzipFileInfo) => {
        const name = canonicalName(file.name);
        if (!entries.has(name)) entries.set(name, { raw: file.name, size: file.originalSize });
        const lower = name.toLowerCase();
        if (!folded.has(lower)) folded.set(lower, name);
        return false;
      },
    });
  } catch (error) {
    throw fail("the file is not a valid ZIP archive", error);
  }
  let unpacked = 0;
  return {
    find(path: string): string | null {
      const name = canonicalName(path);
      return entries.has(name) ? name : folded.get(name.toLowerCase()) ?? null;
    },
    unpack(names: Iterable<string>): Map<string, Uint8Array> {
      const wanted = new Map<string, string>();
      for (const name of names) {
        const entry = entries.get(name);
        if (entry === undefined || wanted.has(entry.raw)) continue;
        // fflate inflates into a buffer of the declared size and never grows it, so checking the
        // declared sizes bounds the memory even when an entry lies about its size.
        if (entry.size > MAX_ENTRY_BYTES) {
          throw fail(`"${name}" unpacks to more than "${MAX_ENTRY_BYTES}" bytes`);
        }
        unpacked += entry.size;
        wanted.set(entry.raw, name);
      }
      if (unpacked > MAX_UNPACKED_BYTES) {
        throw fail(`its files unpack to more than "${MAX_UNPACKED_BYTES}" bytes`);
      }
      if (wanted.size === 0) return new Map();
      let files: Record<string, Uint8Array>;
      try {
        files = unzipSync(bytes, { filter: (file) => wanted.has(file.name) });
      } catch (error) {
        throw fail(`the ZIP archive is damaged: ${errorMessage(error)}`, error);
      }
      const out = new Map<string, Uint8Array>();
      for (const [raw, name] of wanted) if (files[raw] !== undefined) out.set(name, files[raw]);
      return out;
    },
  };
}

/**
 * An entry name as hrefs are compared with it: backslashes as `/` (zipped on Windows), a UTF-8
 * name that fflate read as CP437/Latin-1 (no UTF-8 flag) decoded as UTF-8, NFC.
 */
function canonicalName(name: string): string {
  let fixed = name;
  // fflate maps each byte of a flagless name to one char; bytes that form valid UTF-8 (and are
  // not plain ASCII) were almost surely written as UTF-8 by a zipper that forgot the flag.
  if (/[\x80-\xff]/.test(name) && [...name].every((char) => char.charCodeAt(0) <= 0xff)) {
    const raw = Uint8Array.from(name, (char) => char.charCodeAt(0));
    try {
      fixed = new TextDecoder("utf-8", { fatal: true }).decode(raw);
    } catch {
      // Not UTF-8: a legacy code page; keep fflate's reading.
    }
  }
  return fixed.replaceAll("\\", "/").replace(/^\/+/, "").normalize("NFC");
}

/** A decoded XML or XHTML file, and the encoding it was guessed to be in when it did not say. */
export interface DecodedText {
  text: string;
  /** The encoding used when the declared one (or UTF-8) did not fit the bytes; else `null`. */
  guessed: string | null;
}

const LATIN1 = new TextDecoder("latin1");

/**
 * Decode an XML or XHTML file as XML says to: a byte-order mark first, then the bytes of `<?` in
 * UTF-16, then the XML prolog's `encoding` (or a `<meta charset>`), else UTF-8. Bytes that are not
 * valid in that encoding are not refused (issue 10: only a file that is really binary is): they
 * are read as Windows-1252, the common undeclared legacy encoding, and `guessed` says so.
 * Until the shared `books/decode.ts` (branch books-text) lands, the EPUB reader decodes with this.
 *
 * @param bytes the file's bytes.
 * @returns the text, a leading BOM removed.
 */
export function decodeXml(bytes: Uint8Array): DecodedText {
  const [b0, b1, b2, b3] = bytes;
  let label = "utf-8";
  if (b0 === 0xef && b1 === 0xbb && b2 === 0xbf) label = "utf-8";
  else if (b0 === 0xff && b1 === 0xfe) label = "utf-16le";
  else if (b0 === 0xfe && b1 === 0xff) label = "utf-16be";
  else if (b0 === 0x3c && b1 === 0 && b2 === 0x3f && b3 === 0) label = "utf-16le";
  else if (b0 === 0 && b1 === 0x3c && b2 === 0 && b3 === 0x3f) label = "utf-16be";
  else label = declaredEncoding(LATIN1.decode(bytes.subarray(0, 1024))) ?? "utf-8";
  // A prolog that says UTF-16 in a file whose bytes are ASCII-compatible (the BOM checks failed)
  // is wrong about itself; so is an unknown label.
  if (/^utf-?16/i.test(label) && !(b0 === 0xff || b0 === 0xfe || b1 === 0 || b0 === 0)) {
    label = "utf-8";
  }
  for (const candidate of label === "utf-8" ? [label] : [label, "utf-8"]) {
    try {
      return { text: new TextDecoder(candidate, { fatal: true }).decode(bytes), guessed: null };
    } catch {
      // An unknown label (RangeError) or bytes invalid in it (TypeError): try the next.
    }
  }
  return { text: new TextDecoder("windows-1252").decode(bytes), guessed: "windows-1252" };
}

function declaredEncoding(head: string): string | null {
  const prolog = /^\s*<\?xml[^>]*?\bencoding\s*=\s*["']([A-Za-z0-9._:-]+)["']/.exec(head);
  if (prolog) return prolog[1].toLowerCase();
  const meta = /<meta\b[^>]*?\bcharset\s*=\s*["']?([A-Za-z0-9._:-]+)/i.exec(head);
  return meta ? meta[1].toLowerCase() : null;
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
