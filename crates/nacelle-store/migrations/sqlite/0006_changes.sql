-- Change requests (reviewed multi-key changes), their keys and events, and the review
-- policies that require them. Nacelle's own tables; times are ms since the epoch.

CREATE TABLE IF NOT EXISTS nacelle_change (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id TEXT NOT NULL DEFAULT '',
    title TEXT NOT NULL,
    description TEXT NOT NULL,
    author TEXT NOT NULL,
    state TEXT NOT NULL,
    stale INTEGER NOT NULL DEFAULT 0,
    version INTEGER NOT NULL,
    created_ms INTEGER NOT NULL,
    updated_ms INTEGER NOT NULL,
    publish_at_ms INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS idx_nacelle_change_tenant ON nacelle_change (tenant_id, state);
CREATE INDEX IF NOT EXISTS idx_nacelle_change_due ON nacelle_change (state, publish_at_ms);

CREATE TABLE IF NOT EXISTS nacelle_change_item (
    change_id INTEGER NOT NULL,
    ord INTEGER NOT NULL,
    group_id TEXT NOT NULL,
    data_id TEXT NOT NULL,
    op TEXT NOT NULL,
    content TEXT NOT NULL,
    config_type TEXT NOT NULL,
    base_md5 TEXT NOT NULL,
    PRIMARY KEY (change_id, ord)
);

CREATE TABLE IF NOT EXISTS nacelle_change_event (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    change_id INTEGER NOT NULL,
    kind TEXT NOT NULL,
    username TEXT NOT NULL,
    time_ms INTEGER NOT NULL,
    text TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_nacelle_change_event ON nacelle_change_event (change_id, id);

CREATE TABLE IF NOT EXISTS nacelle_review_policy (
    tenant_id TEXT NOT NULL,
    group_pattern TEXT NOT NULL,
    required_approvals INTEGER NOT NULL,
    updated_by TEXT NOT NULL,
    updated_ms INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, group_pattern)
);
