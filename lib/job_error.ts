/**
 * What a job's `error` may hold: every queue's reason for a Failed (or retried) job goes through
 * {@linkcode jobError} before it is stored, published or logged, so no job error names the
 * host's absolute storage layout or carries a credential (docs/http.md).
 *
 * @module
 */
import { resolve } from "node:path";
import { redact } from "./redact.ts";

/**
 * `text` with every path under `storageDir` made relative to it (`books/a.epub`, the root
 * itself `.`), by its resolved and its real (symlinks followed) path.
 */
export function relativeToStorage(storageDir: string, text: string): string {
  const roots = new Set([resolve(storageDir)]);
  try {
    roots.add(Deno.realPathSync(storageDir));
  } catch {
    // A missing STORAGE_DIR has no real path; the resolved one is enough.
  }
  // Longest first: a root inside another is replaced before its parent. A root is matched only
  // as a whole path (followed by "/" or the end of the path), never as the prefix of a sibling.
  for (const root of [...roots].sort((a, b) => b.length - a.length)) {
    const escaped = root.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    const whole = new RegExp(`${escaped}(?:/+|(?=$|[\\s'"\`:,;)\\]]))`, "g");
    text = text.replace(whole, (match) => match === root ? "." : "");
  }
  return text;
}

/**
 * A job error as it may leave the process: paths relative to `storageDir`, credentials hidden,
 * and each NUL shown as U+FFFD, since PostgreSQL's `text` cannot hold one and the write of the
 * job's reason would fail (a message may quote a file's or a server's bytes).
 *
 * @param storageDir STORAGE_DIR, for a queue that reads or writes there.
 * @example
 * jobError("ENOENT: open '/srv/data/books/a.epub'", "/srv/data"); // "ENOENT: open 'books/a.epub'"
 */
export function jobError(text: string, storageDir?: string): string {
  const shown = redact(storageDir === undefined ? text : relativeToStorage(storageDir, text));
  return shown.replaceAll("\0", "\uFFFD");
}
