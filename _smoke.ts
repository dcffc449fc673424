import { extractInProcess } from "./books/extract_in_process.ts";
for (const f of Deno.args) {
  try {
    const b = await extractInProcess(f, new AbortController().signal);
    console.log("==", f, JSON.stringify({ title: b.title, author: b.author, language: b.language, direction: b.direction, warnings: b.warnings, resources: b.resources?.map((r) => [r.path, r.mediaType, r.bytes.length]) }));
    for (const c of b.chapters) console.log("  -", c.title, "|", c.html.slice(0, 400));
  } catch (e) { console.log("==", f, "ERROR", (e as Error).message); }
}
