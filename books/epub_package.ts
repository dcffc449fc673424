/**
 * Reading an EPUB's package document: the XML parser the OPF, container and NCX go through, and
 * what the metadata says about authors and direction ("a creator with `aut` among its
 * roles, or with no role, is an author"; "Hebrew, Arabic and vertical Japanese come out with no
 * direction").
 *
 * @module
 */
import { ALL_ENTITIES, EntityDecoder } from "@nodable/entities";
import { XMLParser } from "fast-xml-parser";
import { collapseWhitespace, languageDirection, type TextDirection } from "./book.ts";

/** Elements that may repeat, so fast-xml-parser always gives them as arrays. */
const REPEATED = new Set([
  ...["rootfile", "item", "itemref", "title", "creator", "meta", "language", "navPoint"],
]);

// removeNSPrefix: `dc:title`, `opf:role` and unprefixed names all read the same. Values stay
// strings (parseTagValue: false), or a title "1984" would come back as a number. htmlEntities:
// character references (`&#39;`, `&#xE9;`) are XML's own and must be decoded, and HTML's named
// entities (`&eacute;`, `&nbsp;`), invalid in XML, are common in NCX labels and titles: every
// HTML5 name (the library's own table, the one fast-xml-parser uses for its common subset).
/** The parser for the container, the package document and the NCX. */
export const xml = new XMLParser({
  // Entities a DOCTYPE declares are the only ones that can expand past a character or two: they
  // stay bounded as fast-xml-parser's own decoder bounds them (100,000 characters).
  entityDecoder: new EntityDecoder({
    namedEntities: ALL_ENTITIES,
    numericAllowed: true,
    limit: { maxExpandedLength: 100_000, applyLimitsTo: "external" },
  }),
  ignoreAttributes: false,
  attributeNamePrefix: "@_",
  removeNSPrefix: true,
  parseTagValue: false,
  parseAttributeValue: false,
  trimValues: true,
  isArray: (name, _path, _leaf, isAttribute) => !isAttribute && REPEATED.has(name),
});

/**
 * An edition's page-progression direction.
 *
 * @param declared the spine's `page-progression-direction` (`ltr`, `rtl`, `default` or absent).
 * @param language the book's `dc:language`, or `null`.
 * @returns the declared direction, else `rtl` for a right-to-left language, else `ltr` when the
 *   language is known, else `null`.
 */
export function readDirection(
  declared: string | null,
  language: string | null,
): TextDirection | null {
  if (declared === "rtl" || declared === "ltr") return declared;
  if (language === null) return null;
  return languageDirection(language);
}

/**
 * The authors among the `dc:creator`s: a creator with `aut` among its roles, or with no role,
 * where a role is EPUB 2's `opf:role` attribute or an EPUB 3 `<meta refines="#id"
 * property="role">` (a creator may have several: "aut" and "ill").
 *
 * @param metadata the OPF `<metadata>` as fast-xml-parser gives it.
 * @returns the authors' names joined with `", "`, or `null` when there is none.
 */
export function readAuthor(metadata: unknown): string | null {
  const refinedRoles = new Map<string, string[]>();
  for (const meta of list(metadata, "meta")) {
    const refines = attribute(meta, "refines");
    if (attribute(meta, "property") === "role" && refines !== null) {
      const roles = refinedRoles.get(refines) ?? [];
      roles.push(text(meta).trim());
      refinedRoles.set(refines, roles);
    }
  }
  const names = list(metadata, "creator").flatMap((creator) => {
    const id = attribute(creator, "id");
    const opfRole = attribute(creator, "role");
    const roles = [
      ...(opfRole === null ? [] : [opfRole.trim()]),
      ...(id === null ? [] : refinedRoles.get(`#${id}`) ?? []),
    ];
    const name = collapseWhitespace(text(creator));
    return (roles.length === 0 || roles.includes("aut")) && name !== "" ? [name] : [];
  });
  return names.length > 0 ? names.join(", ") : null;
}

// fast-xml-parser returns untyped trees; these read them without trusting their shape.

/** A child of a parsed node by name; `undefined` when the node is not an object. */
export function field(node: unknown, name: string): unknown {
  return typeof node === "object" && node !== null
    ? (node as Record<string, unknown>)[name]
    : undefined;
}

/** A child that may repeat, always as an array (empty when absent). */
export function list(node: unknown, name: string): unknown[] {
  const value = field(node, name);
  if (Array.isArray(value)) return value;
  return value === undefined ? [] : [value];
}

/** An attribute's value (`@_name`), or `null` when it is absent or not a string. */
export function attribute(node: unknown, name: string): string | null {
  const value = field(node, `@_${name}`);
  return typeof value === "string" ? value : null;
}

/** A node's text content (`#text` when it also has attributes); `""` when none. */
export function text(node: unknown): string {
  if (typeof node === "string") return node;
  const value = field(node, "#text");
  return typeof value === "string" ? value : "";
}
