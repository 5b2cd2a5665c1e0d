-- Nacos 2.4's config tables, laid out for SQLite. Column names and unique keys follow the
-- MySQL schema; times (gmt_create, gmt_modified) are stored as milliseconds since the epoch.

CREATE TABLE IF NOT EXISTS config_info (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    data_id TEXT NOT NULL,
    group_id TEXT NOT NULL DEFAULT '',
    content TEXT NOT NULL,
    md5 TEXT,
    gmt_create INTEGER NOT NULL,
    gmt_modified INTEGER NOT NULL,
    src_user TEXT,
    src_ip TEXT,
    app_name TEXT,
    tenant_id TEXT NOT NULL DEFAULT '',
    c_desc TEXT,
    c_use TEXT,
    effect TEXT,
    type TEXT,
    c_schema TEXT,
    encrypted_data_key TEXT NOT NULL DEFAULT '',
    UNIQUE (data_id, group_id, tenant_id)
);

CREATE TABLE IF NOT EXISTS config_info_beta (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    data_id TEXT NOT NULL,
    group_id TEXT NOT NULL,
    app_name TEXT,
    content TEXT NOT NULL,
    beta_ips TEXT,
    md5 TEXT,
    gmt_create INTEGER NOT NULL,
    gmt_modified INTEGER NOT NULL,
    src_user TEXT,
    src_ip TEXT,
    tenant_id TEXT NOT NULL DEFAULT '',
    encrypted_data_key TEXT NOT NULL DEFAULT '',
    UNIQUE (data_id, group_id, tenant_id)
);

CREATE TABLE IF NOT EXISTS config_info_tag (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    data_id TEXT NOT NULL,
    group_id TEXT NOT NULL,
    tenant_id TEXT NOT NULL DEFAULT '',
    tag_id TEXT NOT NULL,
    app_name TEXT,
    content TEXT NOT NULL,
    md5 TEXT,
    gmt_create INTEGER NOT NULL,
    gmt_modified INTEGER NOT NULL,
    src_user TEXT,
    src_ip TEXT,
    UNIQUE (data_id, group_id, tenant_id, tag_id)
);

CREATE TABLE IF NOT EXISTS config_tags_relation (
    id INTEGER NOT NULL,
    tag_name TEXT NOT NULL,
    tag_type TEXT,
    data_id TEXT NOT NULL,
    group_id TEXT NOT NULL,
    tenant_id TEXT NOT NULL DEFAULT '',
    nid INTEGER PRIMARY KEY AUTOINCREMENT,
    UNIQUE (id, tag_name, tag_type)
);
CREATE INDEX IF NOT EXISTS idx_config_tags_relation_tenant ON config_tags_relation (tenant_id);

CREATE TABLE IF NOT EXISTS his_config_info (
    id INTEGER NOT NULL,
    nid INTEGER PRIMARY KEY AUTOINCREMENT,
    data_id TEXT NOT NULL,
    group_id TEXT NOT NULL,
    app_name TEXT,
    content TEXT NOT NULL,
    md5 TEXT,
    gmt_create INTEGER NOT NULL,
    gmt_modified INTEGER NOT NULL,
    src_user TEXT,
    src_ip TEXT,
    op_type TEXT,
    tenant_id TEXT NOT NULL DEFAULT '',
    encrypted_data_key TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS idx_his_did ON his_config_info (data_id);
CREATE INDEX IF NOT EXISTS idx_his_gmt_modified ON his_config_info (gmt_modified);
CREATE INDEX IF NOT EXISTS idx_his_key ON his_config_info (data_id, group_id, tenant_id, nid);
CREATE INDEX IF NOT EXISTS idx_his_id ON his_config_info (id, nid);

CREATE TABLE IF NOT EXISTS tenant_info (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kp TEXT NOT NULL,
    tenant_id TEXT DEFAULT '',
    tenant_name TEXT DEFAULT '',
    tenant_desc TEXT,
    create_source TEXT,
    gmt_create INTEGER NOT NULL,
    gmt_modified INTEGER NOT NULL,
    UNIQUE (kp, tenant_id)
);

CREATE TABLE IF NOT EXISTS users (
    username TEXT NOT NULL PRIMARY KEY,
    password TEXT NOT NULL,
    enabled INTEGER NOT NULL
);

CREATE TABLE IF NOT EXISTS roles (
    username TEXT NOT NULL,
    role TEXT NOT NULL,
    UNIQUE (username, role)
);

CREATE TABLE IF NOT EXISTS permissions (
    role TEXT NOT NULL,
    resource TEXT NOT NULL,
    action TEXT NOT NULL,
    UNIQUE (role, resource, action)
);
