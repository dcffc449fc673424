/**
 * What a reader of the source sees, for the fidelity report's "share of the source's visible text
 * kept": the words of a book file as its own format shows them, read
 * independently of the extractor's chapter logic (the same decoder and parser, nothing else).
 *
 * - Plain text and Markdown: the file's text inside the Project Gutenberg frame.
 * - HTML: the text of the document less `<head>`, `<script>` and `<style>`, `<br>` as a space,
 *   inside the Gutenberg frame.
 * - EPUB: the same, for every XHTML document the spine lists, in spine order.
 *
 * @module
 */
import { DomUtils } from "htmlparser2";
import { extname } from "node:path";
import { decodeBookBytes } from "../books/decode.ts";
import { openArchive } from "../books/epub_archive.ts";
import { directoryOf, resolveHref } from "../books/epub_links.ts";
import { attribute, field, list, xml } from "../books/epub_package.ts";
import { stripGutenbergFrame } from "../books/gutenberg.ts";
import { parseMarkup } from "../books/markup.ts";

/**
 * The visible text of a book file.
 *
 * @param path a `.txt`, `.md`, `.markdown`, `.html`, `.htm`, `.xhtml` or `.epub` file.
 * @returns its visible text (see the module comment).
 * @throws Error when an EPUB has no readable package document.
 */
export async function visibleSourceText(path: string): Promise<string> {
  const extension = extname(path).toLowerCase();
  const bytes = await Deno.readFile(path);
  if (extension === ".epub") return epubText(bytes);
  const html = extension === ".html" || extension === ".htm" || extension === ".xhtml";
  const text = decodeBookBytes(bytes, html ? "html" : "text").text;
  return stripGutenbergFrame(html ? markupText(text) : text).body;
}

/** Text of a page less its head, scripts and styles, with `<br>` read as a space. */
function markupText(source: string): string {
  const document = parseMarkup(source, { recognizeSelfClosing: true, recognizeCDATA: true });
  for (
    const hidden of DomUtils.findAll(
      (e) => ["script", "style", "head", "title"].includes(e.name) && !inSvg(e),
      document.children,
    )
  ) {
    DomUtils.removeElement(hidden);
  }
  for (const line of DomUtils.findAll((e) => e.name === "br", document.children)) {
    DomUtils.replaceElement(line, { ...line, type: "text", data: " " } as never);
  }
  return DomUtils.textContent(document);
}

/** Whether an element sits inside an `<svg>` (whose `<title>` is text a reader can see). */
function inSvg(element: { parent: unknown }): boolean {
  for (let node = element.parent as { name?: string; parent: unknown } | null; node;) {
    if (node.name === "svg") return true;
    node = node.parent as { name?: string; parent: unknown } | null;
  }
  return false;
}

/** The visible text of every XHTML spine document of an EPUB, in spine order. */
function epubText(bytes: Uint8Array): string {
  const archive = openArchive(bytes, (reason) => new Error(`Cannot read EPUB: ${reason}`));
  const read = (name: string): string => {
    const data = archive.unpack([name]).get(name);
    if (data === undefined) throw new Error(`Cannot read EPUB: "${name}" is missing`);
    return decodeBookBytes(data, "xml").text;
  };
  const container = archive.find("META-INF/container.xml");
  if (container === null) throw new Error("Cannot read EPUB: no container.xml");
  const rootfile =
    list(field(field(xml.parse(read(container)), "container"), "rootfiles"), "rootfile")[0];
  const opfPath = archive.find(resolveHref("", attribute(rootfile, "full-path") ?? "").path);
  if (opfPath === null) throw new Error("Cannot read EPUB: no package document");
  const opf = field(xml.parse(read(opfPath)), "package");
  const items = new Map<string, { href: string; type: string }>();
  for (const item of list(field(opf, "manifest"), "item")) {
    const id = attribute(item, "id");
    if (id !== null) {
      items.set(id, {
        href: attribute(item, "href") ?? "",
        type: attribute(item, "media-type") ?? "",
      });
    }
  }
  const texts: string[] = [];
  for (const itemref of list(field(opf, "spine"), "itemref")) {
    const item = items.get(attribute(itemref, "idref") ?? "");
    if (item === undefined || item.type !== "application/xhtml+xml") continue;
    const path = archive.find(resolveHref(directoryOf(opfPath), item.href).path);
    if (path !== null) texts.push(markupText(read(path)));
  }
  return texts.join("\n");
}
