-- Governed changes: the message and change request of a history row, and the audit trail
-- (docs/audit.md). Nacelle's own tables; Nacos's are not touched.

CREATE TABLE IF NOT EXISTS nacelle_history_note (
  nid bigint NOT NULL PRIMARY KEY,
  message text NOT NULL DEFAULT '',
  change_id bigint
);

CREATE TABLE IF NOT EXISTS nacelle_audit (
  seq bigint NOT NULL PRIMARY KEY,
  time_ms bigint NOT NULL,
  user_name varchar(255) NOT NULL DEFAULT '',
  address varchar(128) NOT NULL DEFAULT '',
  protocol varchar(64) NOT NULL DEFAULT '',
  action varchar(64) NOT NULL,
  target text NOT NULL DEFAULT '',
  outcome text NOT NULL DEFAULT '',
  detail text NOT NULL DEFAULT '',
  change_id bigint,
  prev_hash varchar(64) NOT NULL,
  hash varchar(64) NOT NULL
);

CREATE INDEX IF NOT EXISTS idx_nacelle_audit_time ON nacelle_audit (time_ms);
CREATE INDEX IF NOT EXISTS idx_nacelle_audit_user ON nacelle_audit (user_name);
CREATE INDEX IF NOT EXISTS idx_nacelle_audit_action ON nacelle_audit (action);

CREATE TABLE IF NOT EXISTS nacelle_audit_head (
  id integer NOT NULL PRIMARY KEY,
  last_seq bigint NOT NULL,
  last_hash varchar(64) NOT NULL,
  anchor_seq bigint NOT NULL,
  anchor_hash varchar(64) NOT NULL
);

INSERT INTO nacelle_audit_head (id, last_seq, last_hash, anchor_seq, anchor_hash)
VALUES (1, 0, '0000000000000000000000000000000000000000000000000000000000000000', 0,
        '0000000000000000000000000000000000000000000000000000000000000000')
ON CONFLICT (id) DO NOTHING;
