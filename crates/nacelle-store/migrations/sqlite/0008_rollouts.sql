-- Staged rollouts (docs/rollouts.md): a new content of one key, its plan (JSON), where it
-- is, and the lease of the node driving it. Nacelle's own table; times are ms since the
-- epoch. `active_key` is the key's md5 while the rollout is running or paused and `#<id>`
-- after, so its unique index allows one active rollout per key.

CREATE TABLE IF NOT EXISTS nacelle_rollout (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id TEXT NOT NULL DEFAULT '',
    group_id TEXT NOT NULL,
    data_id TEXT NOT NULL,
    content TEXT NOT NULL,
    config_type TEXT NOT NULL,
    base_md5 TEXT NOT NULL,
    plan TEXT NOT NULL,
    state TEXT NOT NULL,
    step INTEGER NOT NULL DEFAULT 0,
    step_started_ms INTEGER NOT NULL,
    advanced_to INTEGER NOT NULL DEFAULT -1,
    reason TEXT NOT NULL,
    lease_holder TEXT NOT NULL DEFAULT '',
    lease_until_ms INTEGER NOT NULL DEFAULT 0,
    author TEXT NOT NULL,
    active_key TEXT NOT NULL,
    version INTEGER NOT NULL,
    created_ms INTEGER NOT NULL,
    updated_ms INTEGER NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS uk_nacelle_rollout_active ON nacelle_rollout (active_key);
CREATE INDEX IF NOT EXISTS idx_nacelle_rollout_state ON nacelle_rollout (state);

-- The note (message, change request) of a gray change-log row, keyed by its `nid`, as
-- `nacelle_history_note` is for `his_config_info`: what a rollout's step publishes say.
CREATE TABLE IF NOT EXISTS nacelle_gray_note (
    nid INTEGER NOT NULL PRIMARY KEY,
    message TEXT NOT NULL DEFAULT '',
    change_id INTEGER
);
