/**
 * DRM in an EPUB: `META-INF/encryption.xml` lists every encrypted resource with its algorithm. Font
 * obfuscation (IDPF's and Adobe's) only scrambles embedded fonts and leaves the text readable;
 * anything else means the content is encrypted and no reader here can open it (a parse
 * failure, "Could not read this file. It may be corrupted or password-protected.").
 *
 * @module
 */
import { XMLParser } from "fast-xml-parser";
import type { Archive } from "./epub_archive.ts";

/** Where an EPUB names its encrypted resources (OCF 3.3 §3.5.3). */
export const ENCRYPTION_XML = "META-INF/encryption.xml";

/** The font-obfuscation algorithms: IDPF (OCF §4.2) and Adobe's older one. */
export const FONT_OBFUSCATION = new Set([
  "http://www.idpf.org/2008/embedding",
  "http://ns.adobe.com/pdf/enc#RC",
]);

const xml = new XMLParser({
  ignoreAttributes: false,
  attributeNamePrefix: "@_",
  removeNSPrefix: true,
  parseTagValue: false,
  parseAttributeValue: false,
  isArray: (name, _path, _leaf, isAttribute) => !isAttribute && name === "EncryptedData",
});

/**
 * Refuse an EPUB whose content is encrypted: `encryption.xml` names an algorithm other than font
 * obfuscation for at least one resource.
 *
 * @param archive the opened EPUB (books/epub_archive.ts).
 * @param fail builds the `UnreadableBookError` to throw from a reason.
 * @throws what `fail` builds when the content is encrypted, naming the first encrypted resource and
 *   its algorithm, or when `encryption.xml` is not valid UTF-8 XML.
 */
export function refuseEncrypted(
  archive: Archive,
  fail: (reason: string, cause?: unknown) => Error,
): void {
  const name = archive.find(ENCRYPTION_XML);
  if (name === null) return;
  let parsed: unknown;
  try {
    const bytes = archive.unpack([name]).get(name)!;
    const source = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
    parsed = xml.parse(source, true);
  } catch (error) {
    throw fail(`"${ENCRYPTION_XML}" cannot be read: ${(error as Error).message}`, error);
  }
  const root = (parsed as Record<string, unknown>)?.encryption as
    | Record<string, unknown>
    | undefined;
  const entries = (root?.EncryptedData ?? []) as Array<Record<string, unknown>>;
  for (const entry of entries) {
    const method = entry?.EncryptionMethod as Record<string, unknown> | undefined;
    const algorithm = String(method?.["@_Algorithm"] ?? "");
    if (FONT_OBFUSCATION.has(algorithm)) continue;
    const reference = (entry?.CipherData as Record<string, unknown> | undefined)
      ?.CipherReference as Record<string, unknown> | undefined;
    const uri = String(reference?.["@_URI"] ?? "(unnamed resource)");
    throw fail(
      `its content is encrypted (DRM): "${uri}" uses "${algorithm || "an unnamed algorithm"}"`,
    );
  }
}
