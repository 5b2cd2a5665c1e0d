-- Governed changes: the message and change request of a history row, and the audit trail
-- (docs/audit.md). Nacelle's own tables; Nacos's are not touched.

CREATE TABLE IF NOT EXISTS nacelle_history_note (
    nid INTEGER NOT NULL PRIMARY KEY,
    message TEXT NOT NULL DEFAULT '',
    change_id INTEGER
);

CREATE TABLE IF NOT EXISTS nacelle_audit (
    seq INTEGER NOT NULL PRIMARY KEY,
    time_ms INTEGER NOT NULL,
    user_name TEXT NOT NULL DEFAULT '',
    address TEXT NOT NULL DEFAULT '',
    protocol TEXT NOT NULL DEFAULT '',
    action TEXT NOT NULL,
    target TEXT NOT NULL DEFAULT '',
    outcome TEXT NOT NULL DEFAULT '',
    detail TEXT NOT NULL DEFAULT '',
    change_id INTEGER,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL
);

CREATE INDEX IF NOT EXISTS idx_nacelle_audit_time ON nacelle_audit (time_ms);
CREATE INDEX IF NOT EXISTS idx_nacelle_audit_user ON nacelle_audit (user_name);
CREATE INDEX IF NOT EXISTS idx_nacelle_audit_action ON nacelle_audit (action);

CREATE TABLE IF NOT EXISTS nacelle_audit_head (
    id INTEGER NOT NULL PRIMARY KEY,
    last_seq INTEGER NOT NULL,
    last_hash TEXT NOT NULL,
    anchor_seq INTEGER NOT NULL,
    anchor_hash TEXT NOT NULL
);

INSERT OR IGNORE INTO nacelle_audit_head (id, last_seq, last_hash, anchor_seq, anchor_hash)
VALUES (1, 0, '0000000000000000000000000000000000000000000000000000000000000000', 0,
        '0000000000000000000000000000000000000000000000000000000000000000');
