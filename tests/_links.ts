/**
 * Checks a written asset version the way a browser opening its chapters would: every `src` and
 * internal `href` must name a file in the version folder, and every `#fragment` an `id` there.
 *
 * @module
 */
import { join } from "node:path";
import { DomUtils, parseDocument } from "htmlparser2";

/** What {@linkcode checkWrittenLinks} found. */
export interface LinkReport {
  /** Internal links and sources checked (external `https:` links are not counted). */
  checked: number;
  /** Each broken one: `<file>: <attribute>="<value>" (<why>)`. */
  broken: string[];
}

const URL_ATTRIBUTES = ["src", "href", "xlink:href", "poster"];

/**
 * Check every chapter (`*.html`) in a version folder.
 *
 * @param dir the version folder, e.g. `<storage>/editions/1/v1`.
 * @returns how many links were checked and which are broken.
 */
export async function checkWrittenLinks(dir: string): Promise<LinkReport> {
  const ids = new Map<string, Set<string>>();
  const idsOf = async (file: string): Promise<Set<string> | null> => {
    if (!ids.has(file)) {
      let text: string;
      try {
        text = await Deno.readTextFile(join(dir, file));
      } catch {
        return null;
      }
      const found = DomUtils.findAll(
        (e) => e.attribs.id !== undefined,
        parseDocument(text).children,
      )
        .map((e) => e.attribs.id);
      ids.set(file, new Set(found));
    }
    return ids.get(file)!;
  };
  const report: LinkReport = { checked: 0, broken: [] };
  for await (const entry of Deno.readDir(dir)) {
    if (!entry.name.endsWith(".html")) continue;
    const document = parseDocument(await Deno.readTextFile(join(dir, entry.name)));
    for (const element of DomUtils.findAll(() => true, document.children)) {
      for (const name of URL_ATTRIBUTES) {
        const value = element.attribs[name];
        if (value === undefined || /^[a-z][a-z0-9+.-]*:/i.test(value)) continue;
        // SVG's own references (`<use href="#glyph">`) are checked like any fragment.
        report.checked++;
        const hash = value.indexOf("#");
        const file = hash === -1 ? value : value.slice(0, hash);
        const fragment = hash === -1 ? null : decodeURIComponent(value.slice(hash + 1));
        const target = file === "" ? entry.name : decodeURIComponent(file);
        const where = `${entry.name}: ${name}="${value}"`;
        if (target.includes("..") || target.startsWith("/")) {
          report.broken.push(`${where} (leaves the version folder)`);
          continue;
        }
        try {
          await Deno.stat(join(dir, target));
        } catch {
          report.broken.push(`${where} (no such file)`);
          continue;
        }
        if (fragment !== null && target.endsWith(".html")) {
          if (!(await idsOf(target))?.has(fragment)) {
            report.broken.push(`${where} (no id "${fragment}")`);
          }
        }
      }
    }
  }
  return report;
}
