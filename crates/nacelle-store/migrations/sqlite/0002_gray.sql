-- Gray release: Nacos 2.5/3.0's config_info_gray, laid out for SQLite (times in ms), and
-- Nacelle's change log and history of gray writes.

CREATE TABLE IF NOT EXISTS config_info_gray (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    data_id TEXT NOT NULL,
    group_id TEXT NOT NULL,
    content TEXT NOT NULL,
    md5 TEXT,
    src_user TEXT,
    src_ip TEXT,
    gmt_create INTEGER NOT NULL,
    gmt_modified INTEGER NOT NULL,
    app_name TEXT,
    tenant_id TEXT NOT NULL DEFAULT '',
    gray_name TEXT NOT NULL,
    gray_rule TEXT NOT NULL,
    encrypted_data_key TEXT NOT NULL DEFAULT '',
    UNIQUE (data_id, group_id, tenant_id, gray_name)
);

CREATE TABLE IF NOT EXISTS nacelle_gray_log (
    nid INTEGER PRIMARY KEY AUTOINCREMENT,
    id INTEGER NOT NULL,
    data_id TEXT NOT NULL,
    group_id TEXT NOT NULL,
    tenant_id TEXT NOT NULL DEFAULT '',
    gray_name TEXT NOT NULL,
    gray_rule TEXT NOT NULL,
    app_name TEXT,
    content TEXT NOT NULL,
    md5 TEXT,
    gmt_create INTEGER NOT NULL,
    gmt_modified INTEGER NOT NULL,
    src_user TEXT,
    src_ip TEXT,
    op_type TEXT,
    encrypted_data_key TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS idx_nacelle_gray_log_key
    ON nacelle_gray_log (data_id, group_id, tenant_id, gray_name);
