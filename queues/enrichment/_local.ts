/**
 * The local enrichment engine: no network, no key. From a book's chapter HTML it derives
 * the language (ISO 639-1), word and character counts, the reading time, a readability grade and
 * the top keywords, each with a maintained library where one exists:
 *
 * - language: `franc-min` (trigram model of the 82 most spoken languages, ISO 639-3 codes), mapped
 *   to ISO 639-1 with `iso-639-3`'s `iso6393To1` table;
 * - readability: `flesch-kincaid` (the 1975 grade-level formula) over `syllable` counts — English
 *   only, since both are tuned for it;
 * - keywords: the most frequent words outside `stopword`'s list for the detected language;
 * - words and sentences: `Intl.Segmenter` (built in, Unicode-aware, so CJK text counts too).
 *
 * @module
 */
import { franc } from "franc-min";
import { iso6393To1 } from "iso-639-3";
// @ts-types="npm:@types/stopword@2.0.3"
import * as stopwords from "stopword";
import { fleschKincaid } from "flesch-kincaid";
import { syllable } from "syllable";
import { Parser } from "htmlparser2";

/** Reading speed used for `reading_time_minutes`: 238 words per minute (Brysbaert 2019, silent reading of English non-fiction). */
export const WORDS_PER_MINUTE = 238;
/** How many keywords are kept. */
export const KEYWORD_COUNT = 10;
/** Characters of text given to the language detector (franc is linear; this is plenty). */
const LANGUAGE_SAMPLE_CHARS = 50_000;

/** What the local engine produces; every field is always present. */
export type LocalMetadata = {
  /** ISO 639-1 code, e.g. `en`; null when undetermined (too little text, or no 639-1 code). */
  language: string | null;
  /** Words (Unicode word segments that hold a letter or digit). */
  word_count: number;
  /** Characters (code points), whitespace runs counted as one. */
  char_count: number;
  /** Minutes at {@linkcode WORDS_PER_MINUTE}, rounded up; 0 for no words. */
  reading_time_minutes: number;
  /** The words-per-minute figure the reading time assumes. */
  words_per_minute: number;
  /** Flesch–Kincaid grade level, 1 decimal; null for a language other than English or no text. */
  readability_grade: number | null;
  /** Up to {@linkcode KEYWORD_COUNT} most frequent non-stopwords (lower case), most frequent first. */
  keywords: string[];
};

/**
 * The text of sanitised chapter HTML: text nodes, a space at every tag boundary, whitespace
 * collapsed.
 *
 * @param html one chapter's HTML.
 * @returns its plain text.
 */
export function htmlToText(html: string): string {
  const parts: string[] = [];
  const parser = new Parser({
    ontext: (text) => void parts.push(text),
    onopentag: () => void parts.push(" "),
    onclosetag: () => void parts.push(" "),
  }, { decodeEntities: true });
  parser.write(html);
  parser.end();
  return parts.join("").replace(/\s+/g, " ").trim();
}

const words = new Intl.Segmenter("und", { granularity: "word" });
const sentences = new Intl.Segmenter("und", { granularity: "sentence" });

/**
 * Compute the local metadata of a book.
 *
 * @param chapters each chapter's HTML, in reading order.
 * @param signal checked between chapters (the work itself is synchronous).
 * @returns the metadata.
 * @throws `signal.reason` when the signal aborts.
 */
export function enrichLocally(chapters: ReadonlyArray<string>, signal: AbortSignal): LocalMetadata {
  const texts: string[] = [];
  for (const html of chapters) {
    signal.throwIfAborted();
    texts.push(htmlToText(html));
  }
  const text = texts.join("\n");
  const code3 = franc(text.slice(0, LANGUAGE_SAMPLE_CHARS));
  const language = code3 === "und" ? null : (iso6393To1[code3] ?? null);

  const stop = new Set<string>(stopwordList(code3));
  const counts = new Map<string, number>();
  let wordCount = 0;
  let syllables = 0;
  for (const chapter of texts) {
    signal.throwIfAborted();
    for (const segment of words.segment(chapter)) {
      if (!segment.isWordLike) continue;
      wordCount++;
      const word = segment.segment.toLowerCase();
      if (language === "en") syllables += syllable(word);
      if ([...word].length < 3 || /^\d+$/.test(word) || stop.has(word)) continue;
      counts.set(word, (counts.get(word) ?? 0) + 1);
    }
  }
  let sentenceCount = 0;
  if (language === "en") {
    for (const chapter of texts) {
      for (const s of sentences.segment(chapter)) if (s.segment.trim()) sentenceCount++;
    }
  }
  const keywords = [...counts.entries()]
    .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
    .slice(0, KEYWORD_COUNT)
    .map(([word]) => word);
  const grade = language === "en" && wordCount > 0 && sentenceCount > 0
    ? Math.round(
      fleschKincaid({ sentence: sentenceCount, word: wordCount, syllable: syllables }) * 10,
    ) / 10
    : null;
  return {
    language,
    word_count: wordCount,
    char_count: [...text.replace(/\s+/g, " ")].length,
    reading_time_minutes: Math.ceil(wordCount / WORDS_PER_MINUTE),
    words_per_minute: WORDS_PER_MINUTE,
    readability_grade: grade,
    keywords,
  };
}

// stopword names its lists by ISO 639-3 code, as franc does; English when it has none.
function stopwordList(code3: string): string[] {
  const lists = stopwords as unknown as Record<string, unknown>;
  const list = lists[code3];
  return Array.isArray(list) ? list as string[] : stopwords.eng;
}
