/**
 * A content document that holds several of the chapters its navigation lists, split into them.
 * Project Gutenberg's Ebookmaker cuts the HTML into files by size, each holding several chapters,
 * while its NCX (and EPUB 3 nav) points at every chapter's heading by `file#id`; a reader expects
 * the navigation's chapters, not the files.
 *
 * @module
 */
import { type ChildNode, type Element, isTag, isText } from "domhandler";
import { DomUtils } from "htmlparser2";
import type { NavEntry } from "./epub_nav.ts";

/** One chapter of a split document: its nodes (a run of the body's children) and its heading. */
export interface DocumentPart {
  /** The navigation's label for it. */
  label: string;
  /** The body's children it is made of, in order. */
  nodes: ChildNode[];
  /** The heading the navigation points at; `null` for what comes before the first chapter. */
  heading: Element | null;
  /** Whether it is the end of the chapter before, in the previous document (no entry names it). */
  continues: boolean;
}

const HEADING = /^h[1-6]$/;

/**
 * Split a document's body at the chapter headings its navigation points at.
 *
 * The entries considered are those at the document's shallowest navigation depth (sections
 * nested under a chapter never split it). Of those that name an `h1`–`h6`, the chapters are the
 * ones of the rank most of them share, when two or more do and no other rank as many (a title page's `h1`
 * over a contents `h2` is front matter, not two chapters); an entry on anything else (a note's
 * `div`, a `section`, a `span`) stays inside the chapter before it. Each chapter heading must be
 * where the text of a child of the body begins, in navigation order; one inside the same child as
 * the one before stays in that chapter (Moby-Dick's "EXTRACTS" in the `div` "ETYMOLOGY" opens).
 * A heading that begins no child's text (inside a paragraph, or after text in one wrapper) leaves
 * the document whole.
 *
 * @param nodes the body's children (the frame already cut out).
 * @param entries the navigation entries that point into this document, in navigation order.
 * @returns the parts, each from its heading (with the blank nodes just before it: an anchor, a
 *   spacer) to the next one; what comes before the first, when it shows anything, is a part of its
 *   own: titled by the document's first entry when that is not the first chapter, else the end of
 *   the previous document's last chapter (`continues`); else it joins the first. `null` when it
 *   does not split.
 */
export function splitAtNav(
  nodes: ChildNode[],
  entries: readonly NavEntry[],
): DocumentPart[] | null {
  if (entries.length < 2) return null;
  const depth = entries.reduce((least, entry) => Math.min(least, entry.depth), Infinity);
  const top = entries.filter((entry) => entry.depth === depth);
  if (top.length < 2) return null;
  // One pass over the document for every target, and one over the body's children for their
  // places: a navigation of thousands of entries into one document stays linear.
  const wanted = new Set(top.map((entry) => entry.fragment));
  const byId = new Map<string, Element>();
  for (const element of DomUtils.findAll((e) => wanted.has(e.attribs.id), nodes)) {
    if (!byId.has(element.attribs.id)) byId.set(element.attribs.id, element);
  }
  const place = new Map(nodes.map((node, index) => [node, index]));
  const targets = top.flatMap((entry) => {
    const target = entry.fragment === null ? undefined : byId.get(entry.fragment);
    return target !== undefined && HEADING.test(target.name)
      ? [{ label: entry.label, heading: target, id: entry.fragment }]
      : [];
  });
  const counts = new Map<string, number>();
  for (const { heading } of targets) counts.set(heading.name, (counts.get(heading.name) ?? 0) + 1);
  const most = Math.max(0, ...counts.values());
  const ranks = [...counts].filter(([, count]) => count === most);
  if (most < 2 || ranks.length !== 1) return null;
  const starts: number[] = [];
  const chapters: { label: string; heading: Element; id: string | null }[] = [];
  for (const target of targets.filter(({ heading }) => heading.name === ranks[0][0])) {
    let child: ChildNode = target.heading;
    while (child.parent !== null && !place.has(child)) child = child.parent as ChildNode;
    const index = place.get(child) ?? -1;
    if (index === starts.at(-1)) continue;
    if (index < (starts.at(-1) ?? -1) || !beginsWith(child, target.heading)) return null;
    starts.push(index);
    chapters.push(target);
  }
  if (starts.length < 2) return null;
  // Each chapter starts at its heading's child, less the blank nodes before it (an empty anchor,
  // a spacer), which are that chapter's.
  const from = starts.map((start, i) => {
    let at = start;
    while (at > (i === 0 ? 0 : starts[i - 1] + 1) && showsNothing(nodes[at - 1])) at -= 1;
    return at;
  });
  const parts: DocumentPart[] = chapters.map((chapter, i) => ({
    label: chapter.label,
    heading: chapter.heading,
    continues: false,
    nodes: nodes.slice(i === 0 ? 0 : from[i], from[i + 1] ?? nodes.length),
  }));
  const lead = nodes.slice(0, from[0]);
  if (lead.some((node) => !showsNothing(node))) {
    parts[0].nodes = parts[0].nodes.slice(from[0]);
    // Text before the first chapter the navigation places here is the end of the one before
    // (Ebookmaker splits files by size, mid-chapter), unless an entry of its own names it.
    const continues = top[0].label === chapters[0].label && top[0].fragment === chapters[0].id;
    parts.unshift({ label: top[0].label, heading: null, nodes: lead, continues });
  }
  return parts;
}

/** Whether the heading's text is where the text of `child` (a body child holding it) begins. */
function beginsWith(child: ChildNode, heading: Element): boolean {
  if (child === heading) return true;
  const text = DomUtils.textContent(child).trimStart();
  const own = DomUtils.textContent(heading).trim();
  return own !== "" && text.startsWith(own);
}

/** A node with no text and no image: an empty `<a id>` paragraph, a `<br/>` spacer, white space. */
function showsNothing(node: ChildNode): boolean {
  if (isText(node)) return node.data.trim() === "";
  if (!isTag(node)) return true;
  return DomUtils.textContent(node).trim() === "" &&
    DomUtils.findOne((e) => /^(img|svg|image|video|audio|object)$/.test(e.name), [node]) === null;
}
