/**
 * EPUBs built in memory for tests and the bench: a small one from named files, and big synthetic
 * ones (thousands of chapters, images, footnotes, MathML) generated, never committed.
 *
 * @module
 */
import { strToU8, type Zippable, zipSync } from "fflate";

/** `META-INF/container.xml` naming `OEBPS/content.opf`. */
export const CONTAINER = `<?xml version="1.0" encoding="UTF-8"?>
<container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">
  <rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/></rootfiles>
</container>`;

/** An XHTML content document. */
export function xhtml(title: string, body: string, htmlAttributes = ""): string {
  return `<?xml version="1.0" encoding="utf-8"?>
<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops"${htmlAttributes}>
<head><title>${title}</title></head><body>${body}</body></html>`;
}

/** A package document with this metadata, manifest items and spine itemrefs (markup). */
export function packageDocument(
  options: { metadata?: string; manifest: string; spine: string; spineAttributes?: string },
): string {
  return `<?xml version="1.0" encoding="UTF-8"?>
<package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="uid">
<metadata xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:opf="http://www.idpf.org/2007/opf">
<dc:identifier id="uid">urn:uuid:00000000-0000-4000-8000-000000000010</dc:identifier>
${options.metadata ?? "<dc:title>Test Book</dc:title><dc:language>en</dc:language>"}
</metadata>
<manifest>${options.manifest}</manifest>
<spine${options.spineAttributes ?? ""}>${options.spine}</spine>
</package>`;
}

/**
 * Zip files into an EPUB (`mimetype` first, stored).
 *
 * @param files archive path → text or bytes.
 * @returns the archive's bytes.
 */
export function zipEpub(files: Record<string, string | Uint8Array>): Uint8Array {
  const entries: Zippable = { mimetype: [strToU8("application/epub+zip"), { level: 0 }] };
  for (const [name, content] of Object.entries(files)) {
    entries[name] = typeof content === "string" ? strToU8(content) : content;
  }
  return zipSync(entries, { level: 6 });
}

/** A tiny valid PNG (1×1, transparent). */
export const PNG = Uint8Array.from(
  atob(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=",
  ),
  (c) => c.charCodeAt(0),
);

/**
 * A PNG's chunk structure around `payload`: the signature, the 1×1 image's `IHDR`, `payload` as
 * one `IDAT` chunk, and `IEND` (CRCs left zero), so a type sniffer reads it as the PNG it is
 * declared to be; the whole file is `payload.length + 45` bytes, as incompressible as `payload`.
 */
function pngFrame(payload: Uint8Array): Uint8Array {
  const ihdr = PNG.subarray(8, 33); // length, "IHDR", 13 bytes, CRC
  const out = new Uint8Array(8 + ihdr.length + 12 + payload.length + 12);
  out.set(PNG.subarray(0, 8));
  out.set(ihdr, 8);
  const view = new DataView(out.buffer);
  let at = 8 + ihdr.length;
  view.setUint32(at, payload.length);
  out.set(new TextEncoder().encode("IDAT"), at + 4);
  out.set(payload, at + 8);
  at += 12 + payload.length;
  out.set(new TextEncoder().encode("IEND"), at + 4);
  return out;
}

/**
 * A big synthetic EPUB 3: the nav document, then `chapters` content documents, each with
 * paragraphs of text, a footnote link to the notes chapter and back, an image every 10th chapter,
 * and (with `math`) MathML formulas.
 *
 * @param chapters how many chapters.
 * @param options `paragraphs` per chapter (default 12); `math` formulas per chapter (default 0);
 *   `imageBytes` size of each image (default 40 KiB, incompressible).
 * @returns the archive's bytes.
 */
export function bigEpub(
  chapters: number,
  options: { paragraphs?: number; math?: number; imageBytes?: number } = {},
): Uint8Array {
  const paragraphs = options.paragraphs ?? 12;
  const files: Record<string, string | Uint8Array> = { "META-INF/container.xml": CONTAINER };
  const words = "the whale ship sea captain harpoon deck wind storm voyage night island".split(" ");
  let seed = 7;
  const word = (): string =>
    words[(seed = (seed * 1103515245 + 12345) % 2147483648) % words.length];
  const manifest: string[] = [
    '<item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>',
    '<item id="notes" href="text/notes.xhtml" media-type="application/xhtml+xml"/>',
  ];
  // The nav document leads the spine, as in most EPUB 3 books: its links are chapter links too.
  const spine: string[] = ['<itemref idref="nav"/>'];
  const nav: string[] = [];
  const notes: string[] = [];
  for (let i = 1; i <= chapters; i++) {
    const body: string[] = [`<h2 id="c${i}">${i}</h2>`];
    for (let p = 0; p < paragraphs; p++) {
      body.push(`<p>${Array.from({ length: 60 }, word).join(" ")}.</p>`);
    }
    for (let m = 0; m < (options.math ?? 0); m++) {
      body.push(
        `<p><math xmlns="http://www.w3.org/1998/Math/MathML"><mrow><msup><mrow><mo>(</mo><mi>a</mi>` +
          `<mo>+</mo><mi>b</mi><mo>)</mo></mrow><mn>${m}</mn></msup><mo>=</mo><mfrac><mrow>` +
          `<mi>x</mi><mo>-</mo><mn>1</mn></mrow><msqrt><mi>y</mi></msqrt></mfrac></mrow></math></p>`,
      );
    }
    body.push(`<p>A note<a id="r${i}" href="notes.xhtml#n${i}">${i}</a>.</p>`);
    if (i % 10 === 0) {
      body.push(`<p><img src="../images/i${i}.png" alt="plate ${i}"/></p>`);
      const image = new Uint8Array(options.imageBytes ?? 40 * 1024);
      for (let k = 0; k < image.length; k += 65536) {
        crypto.getRandomValues(image.subarray(k, k + 65536));
      }
      files[`OEBPS/images/i${i}.png`] = pngFrame(image);
      manifest.push(`<item id="i${i}" href="images/i${i}.png" media-type="image/png"/>`);
    }
    files[`OEBPS/text/c${i}.xhtml`] = xhtml(`Chapter ${i}`, body.join("\n"));
    manifest.push(`<item id="c${i}" href="text/c${i}.xhtml" media-type="application/xhtml+xml"/>`);
    spine.push(`<itemref idref="c${i}"/>`);
    nav.push(`<li><a href="text/c${i}.xhtml">${i}: The ${word()} and the ${word()}</a></li>`);
    notes.push(`<p id="n${i}">Note ${i}. <a href="c${i}.xhtml#r${i}">back</a></p>`);
  }
  spine.push('<itemref idref="notes"/>');
  nav.push('<li><a href="text/notes.xhtml">Notes</a></li>');
  files["OEBPS/text/notes.xhtml"] = xhtml("Notes", notes.join("\n"));
  files["OEBPS/nav.xhtml"] = xhtml(
    "Contents",
    `<nav epub:type="toc"><ol>${nav.join("\n")}</ol></nav>`,
  );
  files["OEBPS/content.opf"] = packageDocument({
    metadata: "<dc:title>Big Book</dc:title><dc:creator>Bench Writer</dc:creator>" +
      "<dc:language>en</dc:language>",
    manifest: manifest.join("\n"),
    spine: spine.join("\n"),
  });
  return zipEpub(files);
}
