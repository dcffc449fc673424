/**
 * An EPUB's own navigation, the first source of its chapter titles (the first heading
 * alone would give "I" where the book's own navigation gives "I: Loomings"): the EPUB 3 navigation document's `toc` nav, else the EPUB 2 NCX `navMap`.
 *
 * @module
 */
import { DomUtils } from "htmlparser2";
import { collapseWhitespace } from "./book.ts";
import { type Archive, decodeEntry } from "./epub_archive.ts";
import { directoryOf, isExternal, resolveHref } from "./epub_links.ts";
import { parseMarkup } from "./markup.ts";

/** Where the navigation documents are: canonical archive paths, `null` when the book has none. */
export interface NavSources {
  /** The manifest item with the `nav` property (EPUB 3). */
  nav: string | null;
  /** The NCX named by the spine's `toc` attribute, else the manifest's NCX item (EPUB 2). */
  ncx: string | null;
}

/**
 * Read the navigation labels: the first label that points into each content document.
 *
 * @param archive the book's archive.
 * @param sources where the navigation documents are.
 * @param parseXml parses an XML file (the package reader's parser), throwing when it cannot.
 * @returns canonical archive path → label (whitespace collapsed, never empty); empty when the book
 *   has no navigation or it lists nothing. A navigation document that cannot be parsed is ignored:
 *   titles then come from the chapters' headings.
 */
export function readNavLabels(
  archive: Archive,
  sources: NavSources,
  parseXml: (bytes: Uint8Array) => unknown,
): Map<string, string> {
  const labels = new Map<string, string>();
  const add = (base: string, href: string | null, label: string): void => {
    const text = collapseWhitespace(label);
    if (href === null || text === "" || isExternal(href)) return;
    const found = archive.find(resolveHref(directoryOf(base), href).path);
    if (found !== null && !labels.has(found)) labels.set(found, text);
  };
  const files = archive.unpack([sources.nav, sources.ncx].filter((p): p is string => p !== null));
  const nav = sources.nav === null ? undefined : files.get(sources.nav);
  if (sources.nav !== null && nav !== undefined) {
    try {
      // Its encoding is the content documents' business: a guess here is not warned about twice.
      const document = parseMarkup(decodeEntry(nav, sources.nav, "html", () => {}), {
        recognizeSelfClosing: true,
        recognizeCDATA: true,
      });
      const navs = DomUtils.findAll((element) => element.name === "nav", document.children);
      const toc = navs.find((element) => /\btoc\b/.test(element.attribs["epub:type"] ?? "")) ??
        navs[0];
      for (const a of toc === undefined ? [] : DomUtils.getElementsByTagName("a", toc)) {
        add(sources.nav, a.attribs.href ?? null, DomUtils.textContent(a));
      }
    } catch {
      // Unreadable navigation: titles fall back to headings.
    }
  }
  const ncx = sources.ncx === null ? undefined : files.get(sources.ncx);
  if (labels.size === 0 && sources.ncx !== null && ncx !== undefined) {
    try {
      const navMap = field(field(parseXml(ncx), "ncx"), "navMap");
      const visit = (points: unknown[]): void => {
        for (const point of points) {
          const label = field(field(point, "navLabel"), "text");
          const src = field(field(point, "content"), "@_src");
          add(sources.ncx!, typeof src === "string" ? src : null, textOf(label));
          visit(list(point, "navPoint"));
        }
      };
      visit(list(navMap, "navPoint"));
    } catch {
      // As above.
    }
  }
  return labels;
}

function field(node: unknown, name: string): unknown {
  return typeof node === "object" && node !== null
    ? (node as Record<string, unknown>)[name]
    : undefined;
}

function list(node: unknown, name: string): unknown[] {
  const value = field(node, name);
  if (Array.isArray(value)) return value;
  return value === undefined ? [] : [value];
}

function textOf(node: unknown): string {
  if (Array.isArray(node)) return textOf(node[0]);
  if (typeof node === "string") return node;
  const value = field(node, "#text");
  return typeof value === "string" ? value : "";
}
