/**
 * Receiving a reader's upload: a `multipart/form-data` body streamed to disk with `busboy`, one
 * file part kept under `<storage>/uploads/<uuid><original extension>` (`.txt.gz` for a gzip'd
 * text), its size capped while it streams. A cut-short or refused upload leaves no file behind.
 * `busboy` is loaded on the first upload.
 *
 * @module
 */
// @ts-types="npm:@types/busboy@1.5.5"
import type busboy from "busboy";
import { createWriteStream } from "node:fs";
import { extname, join } from "node:path";
import { Readable } from "node:stream";
import { finished } from "node:stream/promises";
import { ConfigError } from "../config.ts";

/** Default largest upload, in bytes (100 MiB; `MAX_UPLOAD_BYTES`). */
export const DEFAULT_MAX_UPLOAD_BYTES = 100 * 1024 * 1024;
/** An extension kept on a saved upload: a dot and up to ten lower-case letters or digits. */
const SAFE_EXTENSION = /^\.[a-z0-9]{1,10}$/;

/**
 * The extension a saved upload keeps, which says how it is read (`books/book.ts`): the file name's
 * last one, lower case; for a gzip'd file the one under `.gz` too (`1342-0.txt.gz` → `.txt.gz`),
 * which says what it holds. `""` for none or one that is not {@linkcode SAFE_EXTENSION}.
 */
function keptExtension(filename: string): string {
  const ext = extname(filename).toLowerCase();
  if (!SAFE_EXTENSION.test(ext)) return "";
  if (ext !== ".gz") return ext;
  const inner = extname(filename.slice(0, -ext.length)).toLowerCase();
  return SAFE_EXTENSION.test(inner) ? `${inner}${ext}` : ext;
}

/** Slack for the multipart framing and small fields when judging `Content-Length`, in bytes. */
const FRAMING_BYTES = 64 * 1024;

/** Why an upload was refused; `status` is the HTTP status to answer (400, 413 or 415). */
export class UploadError extends Error {
  override name = "UploadError";
  constructor(readonly status: 400 | 413 | 415, message: string) {
    super(message);
  }
}

/** A received upload. */
export interface Upload {
  /** The text fields by name (the last value wins). */
  fields: Record<string, string>;
  /** The saved file, relative to the storage root, e.g. `uploads/4f…e1.epub`. */
  sourcePath: string;
  /** Absolute or storage-relative path as written, for removal on a later refusal. */
  path: string;
  /** The name the client gave the file. */
  filename: string;
  /** Bytes written. */
  size: number;
}

/**
 * Stream a multipart request's file part (field `file`) to `<storageDir>/uploads/`.
 *
 * @param request the HTTP request; its body is consumed.
 * @param storageDir the storage root.
 * @param maxBytes largest file accepted, in bytes.
 * @returns the fields and the saved file.
 * @throws {UploadError} 415 for a body that is not multipart/form-data, 413 when the file (or the
 *   declared `Content-Length`) exceeds `maxBytes`, 400 when there is no `file` part, more than
 *   one, or the body is malformed or cut short. The partial file is removed first.
 */
export async function receiveUpload(
  request: Request,
  storageDir: string,
  maxBytes: number,
): Promise<Upload> {
  const type = request.headers.get("content-type") ?? "";
  if (!/^multipart\/form-data\b/i.test(type) || !request.body) {
    throw new UploadError(415, "Expected Content-Type: multipart/form-data with a body");
  }
  const declared = Number(request.headers.get("content-length") ?? NaN);
  if (declared > maxBytes + FRAMING_BYTES) throw tooLarge(maxBytes);
  const dir = join(storageDir, "uploads");
  await Deno.mkdir(dir, { recursive: true });

  const fields: Record<string, string> = Object.create(null);
  type Saved = {
    path: string;
    name: string;
    filename: string;
    out: ReturnType<typeof createWriteStream>;
    written: Promise<void>;
  };
  let saved: Saved | null = null;
  let size = 0;
  let problem: UploadError | null = null;
  // busboy is loaded on the first upload, not at startup.
  const { default: createParser } = await import("busboy") as { default: typeof busboy };
  let parser: busboy.Busboy;
  try {
    parser = createParser({
      headers: { "content-type": type },
      // busboy emits "limit" on reaching fileSize, even when the file ends right there: one byte
      // more makes "limit" mean "larger than maxBytes".
      limits: { files: 1, fileSize: maxBytes + 1, fields: 20, fieldSize: 4096, parts: 25 },
    });
  } catch (err) {
    throw new UploadError(400, `Cannot read the multipart body: ${(err as Error).message}`);
  }
  parser.on("field", (name, value) => {
    // Which of two values is meant cannot be known: refused, as a second file is.
    if (Object.hasOwn(fields, name)) {
      problem ??= new UploadError(
        400,
        `Unexpected second field ${JSON.stringify(name)}: send each field once`,
      );
      return;
    }
    fields[name] = value;
  });
  parser.on("file", (field, stream, info) => {
    if (field !== "file" || saved) {
      problem ??= new UploadError(400, `Unexpected file part "${field}": send one part "file"`);
      stream.resume();
      return;
    }
    const name = `${crypto.randomUUID()}${keptExtension(info.filename ?? "")}`;
    const path = join(dir, name);
    const out = createWriteStream(path, { mode: 0o600 });
    // A body cut short makes busboy destroy this part's stream with "Unexpected end of form"; the
    // parser reports it too (the request's 400), but an error event on a stream with no listener
    // is an uncaught error that would end the whole worker. End the file so the
    // partial one can be removed.
    stream.on("error", (err: Error) => {
      problem ??= new UploadError(400, `Cannot read the multipart body: ${err.message}`);
      stream.unpipe(out);
      out.end();
    });
    stream.on("data", (chunk: Uint8Array) => void (size += chunk.length));
    // Past the cap the rest of the body is not read: the wait below ends now, the answer is 413
    // and the server closes the connection (a response sent before its body was read ends it,
    // lib/http/server.ts).
    stream.on("limit", () => {
      problem = tooLarge(maxBytes);
      stream.unpipe(out);
      out.end();
      stopReading(problem);
    });
    stream.pipe(out);
    const written = finished(out);
    // Observed at once: a write error (a full disk) before the parser closes is this request's
    // failure, reported below, never an unhandled rejection.
    written.catch(() => {});
    saved = { path, name, filename: info.filename ?? "", out, written };
  });
  parser.on("filesLimit", () => {
    problem ??= new UploadError(400, 'Unexpected second file: send one part "file"');
  });

  const body = Readable.fromWeb(request.body as import("node:stream/web").ReadableStream);
  let stopReading: (why: Error) => void = () => {};
  try {
    body.pipe(parser);
    await new Promise<void>((resolve, reject) => {
      stopReading = reject;
      parser.on("close", resolve);
      parser.on("error", reject);
      body.on("error", reject);
    });
    await (saved as Saved | null)?.written;
  } catch (err) {
    problem ??= new UploadError(400, `Cannot read the multipart body: ${(err as Error).message}`);
    body.unpipe(parser);
    body.destroy();
    // A body that errors (the client's connection dropped) never ends the parser or the file
    // part: close both, or the wait for the file below never ends and the file is left behind.
    parser.destroy();
    (saved as Saved | null)?.out.destroy();
  }
  const file = saved as Saved | null;
  if (problem || !file) {
    if (file) {
      await file.written.catch(() => {});
      await removeUpload(file.path);
    }
    throw problem ?? new UploadError(400, 'Missing the file part: send the book as field "file"');
  }
  return {
    fields,
    sourcePath: `uploads/${file.name}`,
    path: file.path,
    filename: file.filename,
    size,
  };
}

/** Remove a saved upload; a missing file is not an error. */
export async function removeUpload(path: string): Promise<void> {
  await Deno.remove(path).catch((err) => {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
  });
}

function tooLarge(maxBytes: number): UploadError {
  return new UploadError(413, `Upload exceeds MAX_UPLOAD_BYTES (${maxBytes} bytes)`);
}

/**
 * Read `MAX_UPLOAD_BYTES`.
 *
 * @param env variables by name; an empty string counts as unset.
 * @returns the cap in bytes, default {@linkcode DEFAULT_MAX_UPLOAD_BYTES}.
 * @throws {ConfigError} when set to anything but a positive integer.
 */
export function parseMaxUploadBytes(env: Readonly<Record<string, string | undefined>>): number {
  const raw = env.MAX_UPLOAD_BYTES;
  if (raw === undefined || raw === "") return DEFAULT_MAX_UPLOAD_BYTES;
  if (!/^\d{1,15}$/.test(raw) || Number(raw) < 1) {
    throw new ConfigError(
      `Cannot parse MAX_UPLOAD_BYTES: expected a positive integer (bytes), received ${
        JSON.stringify(raw)
      }`,
    );
  }
  return Number(raw);
}
