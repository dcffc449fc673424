/**
 * `classifyLine()` on lines far longer than a heading (`books/text_headings.ts`): a long line is
 * refused without collapsing all of it, and a heading padded with white space, as HTML elements'
 * text often is, still fits ("Big books stay fast": the length check came after
 * collapsing each section's whole text).
 *
 * @module
 */
import assert from "node:assert/strict";
import { classifyLine, MAX_HEADING_CHARS } from "../../books/text_headings.ts";

Deno.test("classifyLine() reads a heading padded with any amount of white space", () => {
  assert.equal(
    classifyLine(`\n${" ".repeat(5_000)}CONTENTS\n${"\t \u00a0\u3000".repeat(500)}`),
    "contents",
  );
  assert.equal(
    classifyLine(`CHAPTER${" \n ".repeat(200)}XII.${" ".repeat(300)}THE END`),
    "chapter",
  );
  // Exactly as long as a heading may be, once collapsed, with white space around it.
  const longest = `Chapter 1. ${"x".repeat(MAX_HEADING_CHARS - 11)}`;
  assert.equal(longest.length, MAX_HEADING_CHARS);
  assert.equal(classifyLine(`  ${longest.replaceAll(" ", "   ")}  \n`), "chapter");
});

Deno.test("classifyLine() refuses a line longer than a heading, however it starts", () => {
  assert.equal(classifyLine(`Chapter 1. ${"x".repeat(MAX_HEADING_CHARS - 10)}`), null);
  assert.equal(classifyLine(`CONTENTS ${"word ".repeat(2_000_000)}`), null);
});
