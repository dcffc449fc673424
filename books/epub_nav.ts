/**
 * An EPUB's own navigation, the first source of its chapter titles (the first heading
 * alone would give "I" where the book's own navigation gives "I: Loomings") and of where a
 * document holding several chapters splits (`epub_split.ts`): the EPUB 3 navigation document's
 * `toc` nav, else the EPUB 2 NCX `navMap`.
 *
 * @module
 */
import { DomUtils } from "htmlparser2";
import { isTag } from "domhandler";
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

/** One navigation entry that points into a content document. */
export interface NavEntry {
  /** The `#fragment` it points at, `null` for the document itself. */
  fragment: string | null;
  /** Its label, whitespace collapsed, never empty. */
  label: string;
  /** How deep it is nested: 1 for a top-level entry. */
  depth: number;
}

/** The navigation, by the content document its entries point into. */
export interface Nav {
  /** Canonical archive path → the first label that points into that document. */
  labels: Map<string, string>;
  /** Canonical archive path → every entry that points into it, in navigation order. */
  entries: Map<string, NavEntry[]>;
}

/**
 * Read the navigation: the entries that point into each content document.
 *
 * @param archive the book's archive.
 * @param sources where the navigation documents are.
 * @param parseXml parses an XML file (the package reader's parser), throwing when it cannot.
 * @returns the labels and entries by canonical archive path; empty when the book has no
 *   navigation or it lists nothing. A navigation document that cannot be parsed is ignored:
 *   titles then come from the chapters' headings.
 */
export function readNav(
  archive: Archive,
  sources: NavSources,
  parseXml: (bytes: Uint8Array) => unknown,
): Nav {
  const labels = new Map<string, string>();
  const entries = new Map<string, NavEntry[]>();
  const add = (base: string, href: string | null, label: string, depth: number): void => {
    const text = collapseWhitespace(label);
    if (href === null || text === "" || isExternal(href)) return;
    const target = resolveHref(directoryOf(base), href);
    const found = archive.find(target.path);
    if (found === null) return;
    if (!labels.has(found)) labels.set(found, text);
    const list = entries.get(found) ?? [];
    list.push({ fragment: target.fragment, label: text, depth });
    entries.set(found, list);
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
        let depth = 0;
        for (let node = a.parent; node !== null && node !== toc; node = node.parent) {
          if (isTag(node) && node.name === "ol") depth += 1;
        }
        add(sources.nav, a.attribs.href ?? null, DomUtils.textContent(a), Math.max(depth, 1));
      }
    } catch {
      // Unreadable navigation: titles fall back to headings.
    }
  }
  const ncx = sources.ncx === null ? undefined : files.get(sources.ncx);
  if (labels.size === 0 && sources.ncx !== null && ncx !== undefined) {
    try {
      const navMap = field(field(parseXml(ncx), "ncx"), "navMap");
      const visit = (points: unknown[], depth: number): void => {
        for (const point of points) {
          const label = field(field(point, "navLabel"), "text");
          const src = field(field(point, "content"), "@_src");
          add(sources.ncx!, typeof src === "string" ? src : null, textOf(label), depth);
          visit(list(point, "navPoint"), depth + 1);
        }
      };
      visit(list(navMap, "navPoint"), 1);
    } catch {
      // As above.
    }
  }
  return { labels, entries };
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
