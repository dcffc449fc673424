/**
 * The one id schema of every route: a job, edition or user book id is a PostgreSQL `bigint`
 * key, 1 to 2^63 − 1. Past that range a route answers 400 (JSON), never a database error.
 *
 * @module
 */
import { z } from "zod";

/** Largest id (PostgreSQL `bigint`): 2^63 − 1. */
export const MAX_ID = 9223372036854775807n;

const inRange = (raw: string) => {
  const value = BigInt(raw);
  return value >= 1n && value <= MAX_ID;
};

/**
 * An id as a decimal string (a `:id` path segment, a query parameter): 1 to {@linkcode MAX_ID},
 * in decimal without leading zeros (at most 19 digits).
 */
export const idString = z.string().regex(/^[1-9]\d{0,18}$/, "expected a positive integer id")
  .refine(
    // zod runs the refinement after a failed regex too: only a digit string is compared.
    (raw) => !/^\d{1,19}$/.test(raw) || inRange(raw),
    `expected a positive integer id up to ${MAX_ID}`,
  );

/**
 * An id in a JSON body: a decimal string as {@linkcode idString}, or a JSON number that is a safe
 * integer (a larger one has lost its digits already: send it as a string).
 */
export const id = z.union([
  idString,
  z.number().int("expected a positive integer id").refine(
    Number.isSafeInteger,
    "past the safe integer range of JSON numbers: send it as a string",
  ).refine((v) => v >= 1, "expected a positive integer id").transform(String),
]);

/** A route's `:id` parameter. */
export const idParam = z.object({ id: idString });
