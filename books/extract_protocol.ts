/**
 * The messages between `extractBook` (`extract.ts`) and its child process (`extract_child.ts`),
 * how an answer is framed on the child's stdout, and how an error crosses between them.
 * Serialisation (`node:v8`, the structured clone format) keeps only an error's message and a
 * standard name, so `UnreadableBookError` and `Deno.errors.*` would arrive as plain `Error`s and
 * the caller could no longer tell permanent from transient; they travel as plain data and are
 * rebuilt.
 *
 * @module
 */
import { deserialize, serialize } from "node:v8";
import type { ExtractedBook } from "./book.ts";
import { UnreadableBookError } from "./book.ts";

/** Worker → child: extract this file, sent as one JSON line. One request at a time per child. */
export interface ExtractRequest {
  path: string;
}

/** Bytes of an answer frame's header: the payload's length, a big-endian uint32. */
export const FRAME_HEADER_BYTES = 4;

/**
 * Frame an answer for the child's stdout.
 *
 * @returns the header (payload length) followed by the `node:v8`-serialised response.
 */
export function encodeAnswer(response: ExtractResponse): Uint8Array {
  const payload = serialize(response);
  const frame = new Uint8Array(FRAME_HEADER_BYTES + payload.length);
  new DataView(frame.buffer).setUint32(0, payload.length);
  frame.set(payload, FRAME_HEADER_BYTES);
  return frame;
}

/** The payload length a frame header announces. */
export function frameLength(header: Uint8Array): number {
  return new DataView(header.buffer, header.byteOffset, FRAME_HEADER_BYTES).getUint32(0);
}

/** The response a frame's payload holds. */
export function decodeAnswer(payload: Uint8Array): ExtractResponse {
  return deserialize(payload) as ExtractResponse;
}

/** Child → worker: the answer to the request in flight. */
export type ExtractResponse =
  | { ok: true; book: ExtractedBook }
  | { ok: false; error: EncodedError };

/** An error as data: enough to rebuild its class, message, `code` and cause chain. */
export interface EncodedError {
  name: string;
  message: string;
  code?: string;
  stack?: string;
  cause?: EncodedError;
}

/** Causes kept per error, so a cyclic or endless chain cannot grow a message without bound. */
const MAX_CAUSES = 4;

/**
 * Turn a thrown value into data that survives serialisation.
 *
 * @param error anything thrown.
 * @returns its name, message, string `code` and stack, and up to `MAX_CAUSES` causes.
 */
export function encodeError(error: unknown): EncodedError {
  return encode(error, 0);
}

/**
 * Rebuild an error from `encodeError`'s data, as the class the caller checks for.
 *
 * @param encoded what the child sent.
 * @returns an `UnreadableBookError` for one, an instance of `Deno.errors[name]` for a Deno error
 *   (e.g. `NotCapable`, `PermissionDenied`), else an `Error` carrying the original name; each with
 *   the original message, `code`, stack (the child's) and cause chain.
 */
export function decodeError(encoded: EncodedError): Error {
  const options = encoded.cause === undefined ? undefined : { cause: decodeError(encoded.cause) };
  // Own properties only: a name like "toString" must not find Object.prototype's.
  const denoError = Object.hasOwn(Deno.errors, encoded.name)
    ? (Deno.errors as unknown as Record<
      string,
      new (message: string, options?: ErrorOptions) => Error
    >)[
      encoded.name
    ]
    : undefined;
  let error: Error;
  if (encoded.name === "UnreadableBookError") {
    error = new UnreadableBookError(encoded.message, options);
  } else if (denoError !== undefined) {
    error = new denoError(encoded.message, options);
  } else {
    error = new Error(encoded.message, options);
    error.name = encoded.name;
  }
  if (encoded.code !== undefined) Object.assign(error, { code: encoded.code });
  if (encoded.stack !== undefined) error.stack = encoded.stack;
  return error;
}

function encode(error: unknown, depth: number): EncodedError {
  if (!(error instanceof Error)) return { name: "Error", message: String(error) };
  const encoded: EncodedError = { name: error.name, message: error.message };
  const code = (error as { code?: unknown }).code;
  if (typeof code === "string") encoded.code = code;
  if (error.stack !== undefined) encoded.stack = error.stack;
  if (error.cause !== undefined && depth < MAX_CAUSES) {
    encoded.cause = encode(error.cause, depth + 1);
  }
  return encoded;
}
