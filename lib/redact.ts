/**
 * The one redaction of credentials: every log line (lib/log.ts), startup error, `/readyz` detail,
 * job error and dashboard page goes through {@linkcode redact} before it leaves the process
 * (docs/http.md, "Redaction").
 *
 * What it hides, each replaced by `***`:
 * - the password of any `scheme://user:password@…` URL, well-formed or not (a bad `%` escape, a
 *   host list, no host): everything from the `:` after the user to the last `@` of the word;
 * - the value of a `password=`, `sslpassword=`, `token=`, `key=`, `api_key=`, `apikey=` or
 *   `secret=` parameter (a URL query or a libpq `key=value` string);
 * - the credential after `Bearer ` or `Basic `;
 * - every value registered with {@linkcode registerSecret} (the settings that hold secrets:
 *   `INTERNAL_API_TOKEN`, `METRICS_TOKEN`, `ENRICHMENT_API_KEY`, `INDEXNOW_KEY`, the
 *   `DATABASE_URL` password), as written, %-encoded, %-decoded and JSON-escaped.
 *
 * @module
 */

/** What a hidden credential reads as. */
export const REDACTED = "***";

// Shorter values are not hidden on their own (they would blank out common words); the URL and
// parameter rules still hide them where they appear as credentials.
const MIN_SECRET_LENGTH = 6;

const secrets = new Set<string>();

/**
 * Hide `value` wherever it appears from now on.
 *
 * @param value a secret setting's value; empty or undefined is ignored.
 */
export function registerSecret(value: string | undefined): void {
  if (!value) return;
  const forms = [value, encodeURIComponent(value), JSON.stringify(value).slice(1, -1)];
  try {
    forms.push(decodeURIComponent(value));
  } catch {
    // not %-encoded: the other forms stand
  }
  for (const form of forms) if (form.length >= MIN_SECRET_LENGTH) secrets.add(form);
}

/**
 * Register the password of a database URL, if it has one (however malformed the URL).
 *
 * @param url a `postgres://user:password@host/db` URL, or undefined.
 */
export function registerUrlPassword(url: string | undefined): void {
  const match = url ? /^[a-z][a-z0-9+.-]*:\/\/[^\s:@/]*:(\S*)@/i.exec(url) : null;
  if (match) registerSecret(match[1]);
}

const URL_PASSWORD = /\b([a-z][a-z0-9+.-]*:\/\/[^\s:@/"']*):[^\s"']*@/gi;
const PARAMETER =
  /(^|[?&;\s"',{(])((?:ssl)?password|pass|pwd|token|access_token|key|api_?key|secret)=[^&;\s"',})]*/gi;
const AUTHORIZATION = /\b(Bearer|Basic)\s+[A-Za-z0-9\-._~+/]+=*/g;

/**
 * Hide every credential in `text`.
 *
 * @returns `text` with each credential replaced by `***`.
 * @example
 * redact("connect postgres://app:hunter22@db:5432/x failed"); // "connect postgres://app:***@db:5432/x failed"
 */
export function redact(text: string): string {
  let out = text
    .replace(URL_PASSWORD, `$1:${REDACTED}@`)
    .replace(PARAMETER, `$1$2=${REDACTED}`)
    .replace(AUTHORIZATION, `$1 ${REDACTED}`);
  for (const secret of secrets) {
    if (out.includes(secret)) out = out.split(secret).join(REDACTED);
  }
  return out;
}

/**
 * A readable, redacted message for any thrown value.
 *
 * @example
 * redactError(new Error("password authentication failed for postgres://u:pw@h/db"));
 */
export function redactError(err: unknown): string {
  const message = err instanceof Error ? err.message || String(err.cause ?? err.name) : String(err);
  return redact(message);
}

/** The settings whose whole value is a secret. */
export const SECRET_SETTINGS = [
  "INTERNAL_API_TOKEN",
  "METRICS_TOKEN",
  "ENRICHMENT_API_KEY",
  "INDEXNOW_KEY",
] as const;

/**
 * Register every secret setting of `env`: the {@linkcode SECRET_SETTINGS} and the password of
 * `DATABASE_URL`. Called first thing at startup, before any setting is checked.
 */
export function registerSecretsFrom(env: Readonly<Record<string, string | undefined>>): void {
  for (const name of SECRET_SETTINGS) registerSecret(env[name]);
  registerUrlPassword(env.DATABASE_URL);
}
