/**
 * The internal links of an extracted book, checked the way a reader following them would meet
 * them once its chapters are written as `<n>.html` with their resources beside them: every
 * relative `href` (and SVG `xlink:href`) must name a chapter file or a resource of the book, and
 * every `#fragment` an `id` in the file it names. Images (`src`) are not links: an HTML book's
 * pictures name files beside it that a one-file upload does not hold. Shared by `tests/books/books_invariance_test.ts` (the whole
 * regression set) and `bench/fidelity.ts` (the report's broken-links column).
 *
 * @module
 */
import { DomUtils } from "htmlparser2";
import type { ExtractedBook } from "../books/extract.ts";
import { parseMarkup } from "../books/markup.ts";

const URL_ATTRIBUTES = ["href", "xlink:href"];

/**
 * The book's broken internal links.
 *
 * @param book an extracted book.
 * @returns each broken link as `<n>.html: <attribute>="<value>"`; empty when every one lands.
 */
export function brokenLinks(book: ExtractedBook): string[] {
  const parsed = book.chapters.map((chapter) =>
    DomUtils.findAll(() => true, parseMarkup(chapter.html).children)
  );
  const ids = parsed.map((elements) =>
    new Set(elements.flatMap((element) => element.attribs.id ?? []))
  );
  const resources = new Set((book.resources ?? []).map((resource) => resource.path));
  const broken: string[] = [];
  for (const [index, elements] of parsed.entries()) {
    for (const element of elements) {
      for (const name of URL_ATTRIBUTES) {
        const value = element.attribs[name];
        if (value === undefined || /^[a-z][a-z0-9+.-]*:/i.test(value)) continue;
        if (!lands(value, index, ids, resources)) {
          broken.push(`${index + 1}.html: ${name}="${value}"`);
        }
      }
    }
  }
  return broken;
}

/** Whether a relative URL in chapter `index` names a file of the book and an id in it. */
function lands(
  value: string,
  index: number,
  ids: readonly Set<string>[],
  resources: ReadonlySet<string>,
): boolean {
  const hash = value.indexOf("#");
  const file = hash === -1 ? value : value.slice(0, hash);
  const fragment = hash === -1 ? null : decode(value.slice(hash + 1));
  if (resources.has(decode(file))) return fragment === null;
  const chapter = file === "" ? index : /^(\d+)\.html$/.exec(file)?.[1];
  const target = typeof chapter === "string" ? Number(chapter) - 1 : chapter;
  if (target === undefined || ids[target] === undefined) return false;
  return fragment === null || fragment === "" || ids[target].has(fragment);
}

function decode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}
