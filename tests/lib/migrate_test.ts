import assert from "node:assert/strict";
import { testUrl } from "../_db.ts";
import { connect } from "../../lib/db.ts";
import { migrate, readMigrations } from "../../lib/migrate.ts";
import { createLogger } from "../../lib/log.ts";

Deno.test("migrate() applies each migration once when two processes start together", async () => {
  const schema = `t_migrate_${crypto.randomUUID().slice(0, 8)}`;
  const a = connect(testUrl(), { schema, applicationName: "test-migrate-a", max: 1 });
  const b = connect(testUrl(), { schema, applicationName: "test-migrate-b", max: 1 });
  try {
    const migrations = await readMigrations(new URL("../../sql/", import.meta.url));
    assert.ok(migrations.length > 0);
    const log = createLogger("silent");
    const applied = await Promise.all([
      migrate(a, schema, migrations, log),
      migrate(b, schema, migrations, log),
    ]);
    const all = migrations.map((m) => m.version);
    assert.deepEqual(applied.flat().sort((x, y) => x - y), all);
    assert.deepEqual(await migrate(a, schema, migrations, log), []);
    const rows = await a<{ version: number }[]>`select version from schema_migrations order by 1`;
    assert.deepEqual(rows.map((r) => r.version), all);
  } finally {
    await a`drop schema if exists ${a(schema)} cascade`;
    await Promise.all([a.end(), b.end()]);
  }
});
