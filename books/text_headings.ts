/**
 * What a heading line looks like in a plain-text book, in the styles real books use: `CHAPTER XII.
 * THE END`, `Chapter One`, `Capítulo primero. Que trata…`, `STAVE I: MARLEY'S GHOST`, `BOOK ONE`,
 * `PART II`, a bare roman numeral with a title (`I. A SCANDAL IN BOHEMIA`), `PREFACE`, `Epilogue`,
 * and the `CONTENTS` line over a contents list. The HTML reader uses the same kinds to tell a byline or a contents heading from a
 * chapter.
 *
 * @module
 */

/**
 * What a heading line opens, from the largest division to the smallest. `bare`: a lone numeral
 * (`IV`, `IV.`) with no title, which divides a book only as a run counting up from `I` where no
 * other chapter heading does (see `romanValue`); elsewhere it numbers a story's sections.
 * `scene`: a play's scene, which divides only a play with no act (`chapter`) headings.
 */
export type HeadingKind =
  | "part"
  | "chapter"
  | "scene"
  | "numeral"
  | "bare"
  | "matter"
  | "contents";

/** Longest line taken for a heading, in characters. */
export const MAX_HEADING_CHARS = 120;

const ROMAN = "(?=[ivxlcdm])m{0,3}(?:cm|cd|d?c{0,3})(?:xc|xl|l?x{0,3})(?:ix|iv|v?i{0,3})";
const EN_UNITS = "one|two|three|four|five|six|seven|eight|nine";
const EN_TEENS = "ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen";
const EN_TENS = "twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety";
const EN_ORDINALS = "first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|" +
  "eleventh|twelfth|thirteenth|fourteenth|fifteenth|sixteenth|seventeenth|eighteenth|" +
  "nineteenth|twentieth|last|final";
const ES_WORDS = "primer[oa]?|segund[oa]|tercer[oa]?|cuart[oa]|quint[oa]|sext[oa]|" +
  "s[ée]ptim[oa]|octav[oa]|noven[oa]|d[ée]cim[oa]|[úu]nic[oa]|uno|una|dos|tres|cuatro|cinco|" +
  "seis|siete|ocho|nueve|diez";
const FR_WORDS = "premi[eè]re?|deuxi[eè]me|seconde?|troisi[eè]me|quatri[eè]me|cinqui[eè]me|" +
  "sixi[eè]me|septi[eè]me|huiti[eè]me|neuvi[eè]me|dixi[eè]me|" +
  "un|une|deux|trois|quatre|cinq|six|sept|huit|neuf|dix";
const DE_WORDS = "(?:erst|zweit|dritt|viert|f[üu]nft|sechst|siebent|siebt|acht|neunt|zehnt)" +
  "e[snrm]?|eins|zwei|drei|vier|f[üu]nf";
const IT_WORDS = "prim[oa]|second[oa]|terz[oa]|quart[oa]|quint[oa]|sest[oa]|settim[oa]|" +
  "ottav[oa]|non[oa]|decim[oa]";
const PT_WORDS = "primeir[oa]|terceir[oa]|quart[oa]|quint[oa]|sext[oa]|s[ée]tim[oa]|oitav[oa]|" +
  "um|dois|tr[êe]s|quatro|cinco";
const NL_WORDS = "eerste|tweede|derde|vierde|vijfde|zesde|zevende|achtste|negende|tiende|" +
  "een|twee|drie|vijf";
const PL_WORDS = "(?:pierwsz|drug|trzec|czwart|pi[ąa]t|sz[óo]st|si[óo]dm|[óo]sm|dziewi[ąa]t|" +
  "dziesi[ąa]t)\\p{L}{0,3}";
const RU_WORDS = "(?:перв|втор|трет|четв[её]рт|пят|шест|седьм|восьм|девят|десят)\\p{L}{0,3}";

/** A chapter or part number: arabic, roman, or a number word in the languages above. */
const NUMBER = `(?:\\d+|${ROMAN}|(?:${EN_TENS})(?:[- ](?:${EN_UNITS}))?|${EN_TEENS}|` +
  `${EN_UNITS}|hundred|${EN_ORDINALS}|${ES_WORDS}|${FR_WORDS}|${DE_WORDS}|${IT_WORDS}|` +
  `${PT_WORDS}|${NL_WORDS}|${PL_WORDS}|${RU_WORDS})`;

/** After the number: the end of the line, or a separator before the title. */
const AFTER_NUMBER = "(?=$|[\\s.:;,\\-\\u2013\\u2014)\\]])";

/**
 * A play's act (`ACT I.`, `ACTE PREMIER`, `ERSTER AKT.`, `Erster Aufzug`): a play's chapter. A
 * reader of a play goes by acts; its scenes (see `SCENE_WORDS`) divide only a play with no acts.
 */
const ACT_WORDS = "act|acte|akt|aufzug|atto|acto|akte|действие";
/** A scene of a play: `SCENE II. _Newgate._`, `ERSTER AUFTRITT.`, `Scène première`. */
const SCENE_WORDS = "scene|sc[èe]ne|szene|auftritt|escena|scena|явление";

/**
 * The word for "chapter" in the languages books come in: English, Spanish and Portuguese,
 * French, German and the Scandinavian languages, Italian, Dutch, Czech, Polish, Finnish,
 * Croatian and Serbian, Turkish, Greek, Russian and Ukrainian; and the divisions some books use
 * instead (stave, letter, canto).
 */
const CHAPTER_WORDS = "chapter|chap\\.|cap[íi]tulo|cap[íi]tol|cap\\.|chapitre|kapitel|" +
  "kapittel|capitolo|hoofdstuk|kapitola|rozdzia[łl]|luku|poglavlje|b[öo]l[üu]m|κεφάλαιο|глава|" +
  "розділ|stave|letter|canto|adventure|" + ACT_WORDS;
/** The words for "part", "book" and "volume" in the same languages. */
const PART_WORDS = "book|part|volume|vol\\.|libro|livro|parte|tomo|tome|livre|partie|teil|buch|" +
  "band|deel|boek|cz[ęe][śs][ćc]|ksi[ęe]ga|tom|kniha|d[íi]l|osa|kirja|knjiga|μέρος|βιβλίο|" +
  "часть|книга|том|частина";
/** Number words put before the word: "Erstes Kapitel", "Primera parte", "Deuxième partie". */
const ORDINAL_WORDS = `${EN_ORDINALS}|${ES_WORDS}|${FR_WORDS}|${DE_WORDS}|${IT_WORDS}|` +
  `${PT_WORDS}|${NL_WORDS}|${PL_WORDS}|${RU_WORDS}`;
const MATTER_WORDS = "preface|prologue|epilogue|introduction|foreword|afterword|conclusion|" +
  "appendix|postscript|prefacio|pr[óo]logo|ep[íi]logo|introducci[óo]n|pr[ée]face|" +
  "[ée]pilogue|avant-propos|vorwort|nachwort|einleitung|prefazione|предисловие|пролог|эпилог|" +
  "введение|author's preface|the author's preface";
/**
 * The words over a contents list: English, Spanish, Portuguese and Italian (índice, sumário,
 * sommario), French, German, Dutch, Polish, Czech and Slovak, Hungarian, Swedish, Danish and
 * Norwegian, Finnish, Russian, Ukrainian, Greek.
 */
const CONTENTS_WORDS = "contents|table of contents|[íi]ndice(?: general)?|sum[áa]rio|sommario|" +
  "table des mati[èe]res|sommaire|inhalt|inhaltsverzeichnis|inhoud|inhoudsopgave|" +
  "spis tre[śs]ci|spis rzeczy|obsah|tartalom|tartalomjegyz[ée]k|inneh[åa]ll|indhold|innhold|" +
  "sis[äa]llys|sis[äa]llysluettelo|содержание|оглавление|зміст|περιεχόμενα";

const CHAPTER_LINE = new RegExp(
  `^(?:(?:${CHAPTER_WORDS})\\s+(?:the\\s+)?${NUMBER}${AFTER_NUMBER}|` +
    `(?:${NUMBER})\\.?\\s+(?:chapter|kapitel|chapitre|capitolo|cap[íi]tulo|hoofdstuk|fejezet|` +
    `rozdzia[łl]|глава)\\b|` +
    // "THE FIRST ACT", "ERSTER AKT.": the whole line, as a play's dialogue ("Second act; what's
    // the matter with it?") never has it.
    `(?:the\\s+)?(?:${ORDINAL_WORDS})\\s+(?:${ACT_WORDS})\\.?$)`,
  "iu",
);
const SCENE_LINE = new RegExp(
  `^(?:(?:${SCENE_WORDS})\\s+(?:the\\s+)?${NUMBER}${AFTER_NUMBER}|` +
    `(?:the\\s+)?(?:${ORDINAL_WORDS})\\s+(?:${SCENE_WORDS})\\.?$)`,
  "iu",
);
const PART_LINE = new RegExp(
  `^(?:(?:${PART_WORDS})\\s+(?:the\\s+)?${NUMBER}${AFTER_NUMBER}|` +
    `(?:${ORDINAL_WORDS})\\s+(?:part|book|parte|partie|livre|libro|livro|teil|buch|deel|boek|` +
    `cz[ęe][śs][ćc]|ksi[ęe]ga|часть|книга)(?=$|[^\\p{L}]))`,
  "iu",
);
/** The keyword alone, or over a title after a separator or a linking word ("PREFACE TO …"). */
const MATTER_LINE = new RegExp(
  `^(?:${MATTER_WORDS})(?:[.:]?$|\\s*[.:\\-\\u2013\\u2014]\\s*\\S|` +
    `\\s+(?:to|of|for|by|al|a|del|de|du|zur|zum)\\s)`,
  "iu",
);
const CONTENTS_LINE = new RegExp(`^(?:${CONTENTS_WORDS})[.:]?$`, "iu");
/** A bare roman numeral and a title, `I. A SCANDAL IN BOHEMIA`; or the numeral alone (`II.`). */
const NUMERAL_LINE = new RegExp(`^${ROMAN}\\.(?:\\s+(\\S.*))?$`, "i");
/** A roman numeral alone on its line, with or without a full stop: `IV`, `XII.`. */
const BARE_NUMERAL_LINE = new RegExp(`^(${ROMAN})\\.?$`, "i");

/**
 * A CJK chapter marker: 第 + a number (Chinese numerals or digits, full-width too) + the unit —
 * 回 (the classical novel's chapter), 章, 节/節, 话/話 — or, for a part, 卷, 部, 篇; with or
 * without a title after it on the line. Korean writes 제1장. Prose never stops at 第一章 without
 * a comma or full stop on the line, a heading line never has one.
 */
const CJK_LINE =
  /^(?:第[〇零一二三四五六七八九十百千万两\d０-９]+([回章节節话話卷部篇])|제\s*[\d０-９]+\s*([장화부]))(?![^，。！？；]*[，。！？；])/u;

/** Longest CJK heading line, in characters: the marker and a couplet title. */
const MAX_CJK_HEADING_CHARS = 60;

/**
 * The kind of heading a line is, on its own.
 *
 * A bare numeral (`II.`) is a `numeral` only with a title after it (on the line or, see
 * `classifyHeading`, the next): alone it numbers a story's sections. `matter` (preface, epilogue)
 * is the keyword alone or with a short title after a separator, not a sentence starting with it.
 *
 * @param line one line of text; leading and trailing space ignored.
 * @returns the kind, or `null` when the line is not a heading.
 */
export function classifyLine(line: string): HeadingKind | null {
  if (!fitsHeading(line)) return null;
  const text = line.trim().replace(/\s+/g, " ");
  if (text === "" || text.length > MAX_HEADING_CHARS) return null;
  if (CONTENTS_LINE.test(text)) return "contents";
  const cjk = text.length <= MAX_CJK_HEADING_CHARS ? CJK_LINE.exec(text) : null;
  if (cjk !== null) return /[卷部篇부]/.test(cjk[1] ?? cjk[2]) ? "part" : "chapter";
  if (CHAPTER_LINE.test(text)) return "chapter";
  if (PART_LINE.test(text)) return "part";
  if (SCENE_LINE.test(text)) return "scene";
  if (MATTER_LINE.test(text) && text.length <= 60 && !/[,;]$/.test(text)) return "matter";
  const numeral = NUMERAL_LINE.exec(text);
  // A title starts with a capital (or a quote, or a digit): "I. me" is prose.
  if (numeral?.[1] !== undefined && /^[\p{Lu}\p{N}"'“‘¿¡]/u.test(numeral[1])) return "numeral";
  if (BARE_NUMERAL_LINE.test(text)) return "bare";
  return null;
}

/**
 * The value of a lone roman numeral line (`IV`, `xii.`), for telling a run that counts up
 * (`I`, `II`, `III`: chapters) from a stray one.
 *
 * @param line a line `classifyLine` calls `bare`.
 * @returns its value (`4` for `IV`), or `null` when the line is not a lone numeral.
 */
export function romanValue(line: string): number | null {
  const match = BARE_NUMERAL_LINE.exec(line.trim());
  if (match === null) return null;
  const values: Record<string, number> = { i: 1, v: 5, x: 10, l: 50, c: 100, d: 500, m: 1000 };
  const digits = [...match[1].toLowerCase()].map((digit) => values[digit]);
  return digits.reduce(
    (sum, value, index) => sum + (value < (digits[index + 1] ?? 0) ? -value : value),
    0,
  );
}

/**
 * Whether a line, white space collapsed and trimmed, may be short enough for a heading — found
 * without collapsing all of a long one: callers pass whole paragraphs and, from HTML, the text of
 * whole sections, and collapsing each of those first was most of an HTML book's heading work.
 * Never `false` for a line that fits; may be `true` for one `MAX_HEADING_CHARS + 1` long.
 */
function fitsHeading(line: string): boolean {
  if (line.length <= MAX_HEADING_CHARS) return true;
  // Characters once collapsed: a run of white space counts as one, leading space as none (a
  // trailing run is counted, hence the + 1 below).
  let count = 0;
  let inSpace = true;
  for (let index = 0; index < line.length; index += 1) {
    if (isWhiteSpace(line.charCodeAt(index))) {
      if (!inSpace) count += 1;
      inSpace = true;
    } else {
      count += 1;
      inSpace = false;
    }
    if (count > MAX_HEADING_CHARS + 1) return false;
  }
  return true;
}

/** What `\s` matches in a regular expression, by UTF-16 code unit. */
function isWhiteSpace(code: number): boolean {
  return code === 0x20 || (code >= 0x09 && code <= 0x0d) || code === 0xa0 || code === 0x1680 ||
    (code >= 0x2000 && code <= 0x200a) || code === 0x2028 || code === 0x2029 || code === 0x202f ||
    code === 0x205f || code === 0x3000 || code === 0xfeff;
}

/**
 * The kind of heading a paragraph is, with its lines: a heading line alone, or one whose title
 * wraps onto the next lines (`CHAPTER 1. A long title that` / `wraps onto a second line.`) or
 * stands on the next line (`I.` / `THE EVE OF THE WAR.`, `CHAPTER I.` / `Down the Rabbit-Hole`).
 *
 * @param lines the paragraph's trimmed lines.
 * @returns the kind and how many of the lines are the heading (the rest is body), or `null`.
 */
export function classifyHeading(
  lines: readonly string[],
): { kind: HeadingKind; lineCount: number } | null {
  const first = lines[0];
  if (first === undefined) return null;
  let kind = classifyLine(first);
  // "II." alone over a title line is a numbered chapter with its title beneath.
  if (kind === "bare" && lines.length >= 2 && NUMERAL_LINE.test(first.trim())) {
    kind = classifyLine(`${first.trim()} ${lines[1]}`) === "numeral" ? "numeral" : "bare";
  }
  if (kind === null) return null;
  // A lone numeral is its line alone: what follows it in the paragraph is text.
  if (kind === "contents" || kind === "bare") return { kind, lineCount: 1 };
  // A short paragraph is the heading entire: its title wraps. A long one is a heading line over
  // a body that starts without a blank line between them.
  const joined = lines.join(" ");
  const wraps = lines.length <= 4 && joined.length <= 2 * MAX_HEADING_CHARS + 60 &&
    lines.slice(1).every((line) => classifyLine(line) === null);
  // A heading run in to the paragraph it opens ("BOOK I. (_Folio_), CHAPTER I. (_Sperm
  // Whale_).—This whale, among the": Moby-Dick's Cetology), or a line whose sentence runs on
  // into the next, is prose.
  if (
    !wraps && lines.length > 1 &&
    (/[.)](?:—|--)\s*\S/u.test(first) ||
      (/[\p{L},]$/u.test(first) && /^\p{Ll}/u.test(lines[1])))
  ) {
    return null;
  }
  return { kind, lineCount: wraps ? lines.length : 1 };
}
