-- JSON Schemas of config keys (docs/schema-validation.md): a schema applies to the keys of
-- one namespace (tenant_id, '' = public) whose group and dataId match its two patterns
-- (exact, `*`, `x*`, `*x`, `*x*`). Times in ms since the epoch.

CREATE TABLE IF NOT EXISTS nacelle_config_schema (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id TEXT NOT NULL DEFAULT '',
    group_pattern TEXT NOT NULL,
    data_id_pattern TEXT NOT NULL,
    schema_json TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    src_user TEXT NOT NULL DEFAULT '',
    gmt_modified INTEGER NOT NULL,
    UNIQUE (tenant_id, group_pattern, data_id_pattern)
);
