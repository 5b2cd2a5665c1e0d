-- Change requests (reviewed multi-key changes), their keys and events, and the review
-- policies that require them. Nacelle's own tables; times are ms since the epoch.

CREATE TABLE IF NOT EXISTS nacelle_change (
  id bigserial PRIMARY KEY,
  tenant_id varchar(128) NOT NULL DEFAULT '',
  title varchar(256) NOT NULL,
  description text NOT NULL,
  author varchar(128) NOT NULL,
  state varchar(16) NOT NULL,
  stale bigint NOT NULL DEFAULT 0,
  version bigint NOT NULL,
  created_ms bigint NOT NULL,
  updated_ms bigint NOT NULL,
  publish_at_ms bigint NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS idx_nacelle_change_tenant ON nacelle_change (tenant_id, state);
CREATE INDEX IF NOT EXISTS idx_nacelle_change_due ON nacelle_change (state, publish_at_ms);

CREATE TABLE IF NOT EXISTS nacelle_change_item (
  change_id bigint NOT NULL,
  ord bigint NOT NULL,
  group_id varchar(128) NOT NULL,
  data_id varchar(255) NOT NULL,
  op varchar(16) NOT NULL,
  content text NOT NULL,
  config_type varchar(64) NOT NULL,
  base_md5 varchar(32) NOT NULL,
  PRIMARY KEY (change_id, ord)
);

CREATE TABLE IF NOT EXISTS nacelle_change_event (
  id bigserial PRIMARY KEY,
  change_id bigint NOT NULL,
  kind varchar(16) NOT NULL,
  username varchar(128) NOT NULL,
  time_ms bigint NOT NULL,
  text text NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_nacelle_change_event ON nacelle_change_event (change_id, id);

CREATE TABLE IF NOT EXISTS nacelle_review_policy (
  tenant_id varchar(128) NOT NULL,
  group_pattern varchar(128) NOT NULL,
  required_approvals bigint NOT NULL,
  updated_by varchar(128) NOT NULL,
  updated_ms bigint NOT NULL,
  PRIMARY KEY (tenant_id, group_pattern)
);
