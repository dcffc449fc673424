/**
 * docs/schema.sql is the migrated schema as `deno task schema` writes it (tools/schema.ts): a
 * migration added without regenerating it fails here.
 *
 * @module
 */
import assert from "node:assert/strict";
import { dbTest } from "../_db.ts";
import { dumpSchema, SCHEMA_FILE } from "../../tools/schema.ts";

dbTest(
  "docs/schema.sql matches the migrations (run `deno task schema` after adding one)",
  async (db) => {
    const dump = await dumpSchema(db.sql, db.schema);
    assert.ok(/create table ingestion_jobs/.test(dump) && /create trigger/i.test(dump), dump);
    assert.equal(await Deno.readTextFile(SCHEMA_FILE), dump);
  },
);
