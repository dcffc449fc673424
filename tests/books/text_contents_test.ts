/**
 * `extractBook()` on plain-text contents lists (`books/text_contents.ts`): a contents list ends
 * where its entries end and never eats the body; its entries name the body's headings whatever
 * their case, full stops, page numbers and footnote marks; the contents word in the languages
 * books come in. The `t*` cases in `tests/fixtures/cases/` are minimal forms of real Project
 * Gutenberg books that failed; beside each, a book built here of the same kind.
 *
 * @module
 */
import assert from "node:assert/strict";
import { type ExtractedBook } from "../../books/extract.ts";
import { htmlText } from "../../books/sanitize.ts";
import { extractCase, extractFrom, titles } from "../_books.ts";

/** Every chapter's text, joined: what a reader can read of the book. */
function allText(book: ExtractedBook): string {
  return book.chapters.map((chapter) => htmlText(chapter.html)).join("\n");
}

Deno.test("t1: a contents list over headings in another case ends where the body starts", async () => {
  const book = await extractCase("t1-contents-unnamed-headings.txt");
  assert.equal(book.title, "A TALE");
  assert.deepEqual(book.chapters, [
    { title: "THE START.", html: "<p>Once upon a time there was a tale.</p>" },
    { title: "THE END.", html: "<p>And so it ended.</p>" },
  ]);
});

Deno.test("t1b: the first chapter under a contents list is kept when later ones are styled", async () => {
  const book = await extractCase("t1b-contents-then-chapter.txt");
  assert.deepEqual(titles(book), ["THE START.", "CHAPTER II. THE END."]);
  assert.match(allText(book), /Once upon a time there was a tale\./);
});

Deno.test("t1c: contents entries with page numbers end at the first chapter's heading", async () => {
  const book = await extractCase("t1c-contents-page-numbers.txt");
  assert.deepEqual(titles(book), ["THE DEPARTURE.", "A FIRST STORM.", "PORTSMOUTH."]);
  assert.equal(book.warnings?.length ?? 0, 0);
});

Deno.test("kind of t1: a contents list never eats the text after it", async () => {
  // Headings the list does not name, prose right under the list: the book is unsplit, never lost.
  const unnamed = await extractFrom(
    "essays.txt",
    "ESSAYS\n\nContents\n\nOn Walking\nOn Reading\n\nWe set out at noon, and walked far.\n\n" +
      "A second paragraph of the same essay.\n",
  );
  assert.match(allText(unnamed), /We set out at noon/);
  assert.match(allText(unnamed), /A second paragraph/);
  // A contents word over prose, no list: kept as text.
  const prose = await extractFrom(
    "notes.txt",
    "NOTES\n\nCONTENTS\n\nThe box held letters, and nothing else of any worth at all.\n\n" +
      "CHAPTER 1\n\nIt began.\n",
  );
  assert.deepEqual(titles(prose), ["NOTES", "CHAPTER 1"]);
  assert.match(htmlText(prose.chapters[0].html), /^CONTENTS\s+The box held letters/);
  // Entries named again in lower case, with page numbers and leader dots, and title-cased
  // headings in the body.
  const dotted = await extractFrom(
    "walks.txt",
    "WALKS\n\nTABLE OF CONTENTS.\n\nBy the River ........ 1\nOn the Hill ......... 9\n\n\n" +
      "By The River\n\nThe water ran.\n\nOn The Hill\n\nThe wind blew.\n",
  );
  assert.deepEqual(titles(dotted), ["By The River", "On The Hill"]);
});

Deno.test("t2: contents entries name headings ending in a full stop, one entry a line", async () => {
  const double = await extractCase("t2-contents-full-stops.txt");
  assert.deepEqual(titles(double), ["THE DEPARTURE.", "A FIRST STORM.", "PORTSMOUTH."]);
  // No title page left out: PORTSMOUTH is the last chapter's heading, not front matter.
  assert.deepEqual(double.warnings ?? [], []);
  const single = await extractCase("t2b-contents-single-spaced.txt");
  assert.equal(single.author, "A SAILOR");
  assert.deepEqual(titles(single), [
    "THE DEPARTURE.",
    "A FIRST STORM.",
    "PORTSMOUTH.",
    "LONDON BRIDGE.",
  ]);
});

Deno.test("kind of t2: entries name headings with footnote marks; lone numerals stay inside", async () => {
  const book = await extractFrom(
    "voyage.txt",
    "VOYAGE\n\nCONTENTS.\n\nAT SEA                 3.\nIN PORT               17.\n\n\n" +
      "AT SEA[1].\n\nI.\n\nThe sea rose.\n\nII.\n\nIt fell again.\n\nIN PORT.\n\nWe landed.\n\n" +
      "[Footnote 1: Written on board.]\n",
  );
  // "I." and "II." number the sections of a chapter the contents names: no chapters of their own.
  assert.deepEqual(titles(book), ["AT SEA[1].", "IN PORT."]);
  assert.match(allText(book), /I\.\s+The sea rose\.\s+II\.\s+It fell again\./);
});

Deno.test("extractBook() knows the contents word in the languages books come in", async () => {
  for (
    const word of [
      "INHOUD.",
      "Inhoudsopgave",
      "Inhalt",
      "Índice",
      "Indice",
      "Sommaire",
      "Table des matières",
      "Sumário",
      "Содержание",
      "Оглавление",
      "Spis treści",
      "Obsah",
      "Tartalom",
      "Innehåll",
      "Indhold",
      "Innhold",
      "Sisällys",
      "Περιεχόμενα",
    ]
  ) {
    const book = await extractFrom(
      "boek.txt",
      `BOEK\n\n${word}\n\nDE REIS\nDE STORM\n\n\nDE REIS.\n\nWij vertrokken.\n\nDE STORM.\n\n` +
        "De zee was hoog.\n",
    );
    assert.deepEqual(titles(book), ["DE REIS.", "DE STORM."], word);
  }
});

Deno.test("t3: a contents list's last entry named again at the end is no chapter at the front", async () => {
  const book = await extractCase("t3-contents-epilogue.txt");
  assert.deepEqual(titles(book), [
    "THE WHALE",
    "ETYMOLOGY.",
    "CHAPTER 1. Loomings.",
    "CHAPTER 2. The Carpet-Bag.",
    "Epilogue",
  ]);
  // The transcriber's note between the list and the body is kept, at the front.
  assert.match(htmlText(book.chapters[0].html), /^Transcriber note/);
  assert.equal(htmlText(book.chapters[4].html), "The drama is done.");
});

Deno.test("kind of t3: an entry ending in a full stop or a ! is an entry; a PREFACE it does not name is not", async () => {
  const book = await extractFrom(
    "whale.txt",
    "WHALE\n\nCONTENTS\n\nETYMOLOGY.\n\nEXTRACTS (Supplied by a Librarian).\n\n" +
      "CHAPTER 1. Hark!\n\nCHAPTER 2. A Long Title That Wraps Onto a Second Line, and Goes\n" +
      "On and On.\n\nEpilogue\n\nPREFACE\n\nI wrote this at sea.\n\nETYMOLOGY.\n\nWords.\n\n" +
      "EXTRACTS. (Supplied by a Librarian).\n\nQuotes.\n\nCHAPTER 1. Hark!\n\nOne.\n\n" +
      "CHAPTER 2. A Long Title That Wraps Onto a Second Line, and Goes\nOn and On.\n\nTwo.\n\n" +
      "Epilogue\n\nThe end.\n",
  );
  assert.deepEqual(titles(book), [
    "PREFACE",
    "ETYMOLOGY.",
    "EXTRACTS. (Supplied by a Librarian).",
    "CHAPTER 1. Hark!",
    "CHAPTER 2. A Long Title That Wraps Onto a Second Line, and Goes On and On.",
    "Epilogue",
  ]);
});

Deno.test("extractBook() gives a book of headings with no text under them as one chapter", async () => {
  // A contents list and nothing else (a file cut short): unsplit, never "no chapters".
  const book = await extractFrom(
    "list.txt",
    "LIST\n\nCONTENTS\n\nCHAPTER 1. Alpha\n\nCHAPTER 2. Beta\n",
  );
  assert.deepEqual(titles(book), ["LIST"]);
  assert.match(allText(book), /CHAPTER 1\. Alpha\s+CHAPTER 2\. Beta/);
});

Deno.test("extractBook() reads a front contents list with no CONTENTS line, and the headings it names", async () => {
  const book = await extractFrom(
    "door.txt",
    "THE DOOR\n\nPREFACE\n\nCHAPTER 1. The Door\n\nCHAPTER 2. The Search\n\nA Word After\n\n\n" +
      "PREFACE\n\nI wrote it.\n\nCHAPTER 1. The Door\n\nText.\n\nCHAPTER 2. The Search\n\nMore.\n\n" +
      "A Word After\n\nThanks.\n",
  );
  assert.deepEqual(titles(book), [
    "PREFACE",
    "CHAPTER 1. The Door",
    "CHAPTER 2. The Search",
    "A Word After",
  ]);
});

Deno.test("extractBook() leaves out a contents list at the back of the book, not verse", async () => {
  const book = await extractFrom(
    "contes.txt",
    "CONTES\n\nLE LOUP.\n\nIl était une fois un loup.\n\nLA CHÈVRE.\n\nUne chèvre vivait là.\n\n" +
      "TABLE DES MATIÈRES\n\nLe Loup                 1\nLa Chèvre               9\n",
  );
  assert.deepEqual(book.chapters, [
    { title: "LE LOUP.", html: "<p>Il était une fois un loup.</p>" },
    { title: "LA CHÈVRE.", html: "<p>Une chèvre vivait là.</p>" },
  ]);
  // Short lines under a contents word to the end, naming nothing before them, are kept.
  const verse = await extractFrom(
    "verse.txt",
    "VERSE\n\nCHAPTER 1\n\nIt began.\n\nCONTENTS\n\nThe rose is red\nThe sky is blue\n",
  );
  assert.match(htmlText(verse.chapters[0].html), /The rose is red\s+The sky is blue/);
});
