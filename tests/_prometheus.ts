/**
 * Read a Prometheus text exposition the way a scraper does: with a parser of the format
 * (parse-prometheus-text-format, the npm parser; prom2json's output shape), not with prom-client.
 *
 * That parser folds a histogram's `_bucket`/`_sum`/`_count` lines into one unlabelled entry and
 * loses per-label series (it ports an old client_python parser), so the text is parsed twice:
 * as is, for each family's declared type (and to reject malformed text), and with the HELP/TYPE
 * lines left out, which makes every sample line its own untyped sample with its labels.
 *
 * @module
 */
import parsePrometheusTextFormat from "parse-prometheus-text-format";

/** One metric family as parsed (prom2json shape; values are strings). */
interface Family {
  name: string;
  type: "COUNTER" | "GAUGE" | "HISTOGRAM" | "SUMMARY" | "UNTYPED";
  metrics: Array<{ labels?: Record<string, string>; value?: string }>;
}

const parse = parsePrometheusTextFormat as (text: string) => Family[];

/** A parsed scrape: each family's type, and every sample by its full name. */
export interface Scrape {
  /** Family name → declared type, e.g. `COUNTER`. */
  types: Map<string, Family["type"]>;
  /** Sample name (e.g. `x_seconds_count`) → its samples with labels. */
  samples: Map<string, Array<{ labels: Record<string, string>; value: number }>>;
}

/** Parse a scrape body; throws when the text is not the format. */
export function parseScrape(text: string): Scrape {
  const types = new Map(parse(text).map((f) => [f.name, f.type]));
  const samples: Scrape["samples"] = new Map();
  for (const family of parse(text.replace(/^# (HELP|TYPE) .*\n/gm, ""))) {
    const list = samples.get(family.name) ?? [];
    for (const m of family.metrics) list.push({ labels: m.labels ?? {}, value: Number(m.value) });
    samples.set(family.name, list);
  }
  return { types, samples };
}

/**
 * The value of the one sample named `name` with exactly these labels (for a histogram, ask for
 * `<name>_count` or `<name>_sum`).
 *
 * @throws Error when there is no such sample.
 */
export function valueOf(scrape: Scrape, name: string, labels: Record<string, string> = {}): number {
  const found = (scrape.samples.get(name) ?? []).find((s) =>
    Object.keys(labels).length === Object.keys(s.labels).length &&
    Object.entries(labels).every(([k, v]) => s.labels[k] === v)
  );
  if (!found) {
    throw new Error(
      `No sample ${name}${JSON.stringify(labels)}: ${JSON.stringify(scrape.samples.get(name))}`,
    );
  }
  return found.value;
}
