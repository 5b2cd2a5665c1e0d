-- Webhooks (docs/webhooks.md) and their durable deliveries. Nacelle's own tables; times
-- are ms since the epoch. A pending delivery is claimed by one sender at a time: the
-- claim sets lease_owner and lease_until_ms by a compare-and-set UPDATE.

CREATE TABLE IF NOT EXISTS nacelle_webhook (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id TEXT NOT NULL DEFAULT '',
    group_pattern TEXT NOT NULL,
    data_id_pattern TEXT NOT NULL,
    url TEXT NOT NULL,
    secret TEXT NOT NULL,
    events TEXT NOT NULL DEFAULT '',
    enabled INTEGER NOT NULL DEFAULT 1,
    description TEXT NOT NULL DEFAULT '',
    created_by TEXT NOT NULL DEFAULT '',
    created_ms INTEGER NOT NULL,
    updated_ms INTEGER NOT NULL
);

CREATE TABLE IF NOT EXISTS nacelle_webhook_delivery (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    hook_id INTEGER NOT NULL,
    event_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    body TEXT NOT NULL,
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    last_code INTEGER NOT NULL DEFAULT 0,
    last_error TEXT NOT NULL DEFAULT '',
    next_attempt_ms INTEGER NOT NULL,
    lease_owner TEXT NOT NULL DEFAULT '',
    lease_until_ms INTEGER NOT NULL DEFAULT 0,
    created_ms INTEGER NOT NULL,
    updated_ms INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_nacelle_webhook_delivery_due
    ON nacelle_webhook_delivery (status, next_attempt_ms);
CREATE INDEX IF NOT EXISTS idx_nacelle_webhook_delivery_hook
    ON nacelle_webhook_delivery (hook_id, id);
