/**
 * Links inside a one-file book (HTML, Markdown) once it is split into chapters: a link to an `id`
 * (`href="#note1"`, or `book.html#note1` naming the book's own file) is rewritten to the chapter
 * file that now holds that `id` (`3.html#note1`; `#note1` within its own chapter), as the EPUB
 * reader does for its spine items (`epub_links.ts`). A link to an `id` no chapter has, or to a
 * file that is not the book (a sibling page the upload does not hold), loses its `href` with a
 * `resource_missing` warning: the reader keeps its text, and no link is left broken. Chapters are
 * written as `<n>.html` side by side (`queues/ssg`, `lib/assets`), chapter `i` as `<i + 1>.html`.
 *
 * @module
 */
import type { BookWarning } from "./book.ts";
import { isExternal } from "./epub_links.ts";

/** Warnings kept per book for links: a book with thousands of broken ones needs the first few. */
const MAX_LINK_WARNINGS = 20;

/** An `href` (or SVG `xlink:href`) attribute as the sanitiser writes it: double-quoted, escaped. */
const HREF = /(\s(?:xlink:)?href)="([^"]*)"/g;
/** An `id` attribute as the sanitiser writes it. */
const ID = /\sid="([^"]*)"/g;

/**
 * Rewrite the links of a book's chapters to the chapter files that hold their targets.
 *
 * @param htmls each chapter's sanitised html, in reading order (chapter `i` is `<i + 1>.html`).
 * @param ownNames the names the book's own file goes by in a link (its base name, percent-decoded
 *   and lower-cased), so `book.html#x` is a link inside the book.
 * @param warnings receives one `resource_missing` warning per target that is not in the book (at
 *   most `MAX_LINK_WARNINGS`).
 * @returns each chapter's html with its internal links rewritten.
 */
export function linkChapters(
  htmls: readonly string[],
  ownNames: ReadonlySet<string>,
  warnings: BookWarning[],
): string[] {
  const home = new Map<string, number>();
  for (const [index, html] of htmls.entries()) {
    for (const match of html.matchAll(ID)) {
      const id = unescapeAttribute(match[1]);
      if (!home.has(id)) home.set(id, index);
    }
  }
  const warned = new Set<string>();
  let count = 0;
  const warn = (target: string, message: string): void => {
    if (warned.has(target)) return;
    warned.add(target);
    if (count++ < MAX_LINK_WARNINGS) warnings.push({ kind: "resource_missing", message });
  };
  return htmls.map((html, index) =>
    html.replace(HREF, (whole, name: string, value: string) => {
      const href = unescapeAttribute(value).trim();
      if (href === "" || isExternal(href)) return whole;
      const hash = href.indexOf("#");
      const file = hash === -1 ? href : href.slice(0, hash);
      const fragment = hash === -1 ? "" : safeDecode(href.slice(hash + 1));
      const ownFile = file === "" || ownNames.has(fileName(file));
      if (!ownFile) {
        warn(file, `Link target "${file}" is not in the book; the link was removed`);
        return "";
      }
      if (fragment === "") {
        // The book itself, as a whole: its first chapter.
        return `${name}="${index === 0 ? "#" : "1.html"}"`;
      }
      const target = home.get(fragment);
      if (target === undefined) {
        warn(`#${fragment}`, `Link target "#${fragment}" is not in the book; the link was removed`);
        return "";
      }
      const escaped = escapeAttribute(fragment);
      return target === index ? `${name}="#${escaped}"` : `${name}="${target + 1}.html#${escaped}"`;
    })
  );
}

/**
 * How a link names a file, for comparing with the book's own name: its last path segment,
 * percent-decoded, lower case, a query left out.
 *
 * @param href a relative URL's path part.
 * @returns e.g. `"book.html"` for `"./Book.html?x=1"`.
 */
export function fileName(href: string): string {
  const bare = href.replace(/\?.*$/, "");
  return safeDecode(bare.slice(bare.lastIndexOf("/") + 1)).toLowerCase();
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

const ESCAPES: Readonly<Record<string, string>> = {
  "&amp;": "&",
  "&lt;": "<",
  "&gt;": ">",
  "&quot;": '"',
};

/** An attribute value as the sanitiser escaped it (`&`, `<`, `>` and `"`), read back. */
function unescapeAttribute(value: string): string {
  return value.replace(/&(?:amp|lt|gt|quot);/g, (entity) => ESCAPES[entity]);
}

/** An attribute value escaped as the sanitiser writes it. */
function escapeAttribute(value: string): string {
  return value.replace(/&/g, "&amp;").replace(/"/g, "&quot;").replace(/</g, "&lt;")
    .replace(/>/g, "&gt;");
}
