-- Nacos 2.4's tables laid out for PostgreSQL: the same table names, column names and unique
-- keys as Nacos's MySQL schema, so the same rows mean the same things. Types are
-- PostgreSQL's: bigserial for auto-increment ids, text for long text, varchar(n) where
-- MySQL has varchar(n) (both count characters), and `timestamp(3)` holding UTC for
-- gmt_create/gmt_modified (tenant_info keeps bigint ms, as in Nacos). tenant_id is
-- NOT NULL DEFAULT '' so the default namespace is '' and unique keys hold.
-- Created only where absent. Every `;` ends a line: the store splits this script at line
-- ends.

CREATE TABLE IF NOT EXISTS config_info (
  id bigserial PRIMARY KEY,
  data_id varchar(255) NOT NULL,
  group_id varchar(128) NOT NULL DEFAULT '',
  content text NOT NULL,
  md5 varchar(32),
  gmt_create timestamp(3) NOT NULL DEFAULT (now() AT TIME ZONE 'UTC'),
  gmt_modified timestamp(3) NOT NULL DEFAULT (now() AT TIME ZONE 'UTC'),
  src_user text,
  src_ip varchar(50),
  app_name varchar(128),
  tenant_id varchar(128) NOT NULL DEFAULT '',
  c_desc varchar(256),
  c_use varchar(64),
  effect varchar(64),
  type varchar(64),
  c_schema text,
  encrypted_data_key varchar(1024) NOT NULL DEFAULT '',
  CONSTRAINT uk_configinfo_datagrouptenant UNIQUE (data_id, group_id, tenant_id)
);

CREATE TABLE IF NOT EXISTS config_info_aggr (
  id bigserial PRIMARY KEY,
  data_id varchar(255) NOT NULL,
  group_id varchar(128) NOT NULL,
  datum_id varchar(255) NOT NULL,
  content text NOT NULL,
  gmt_modified timestamp(3) NOT NULL,
  app_name varchar(128),
  tenant_id varchar(128) NOT NULL DEFAULT '',
  CONSTRAINT uk_configinfoaggr_datagrouptenantdatum UNIQUE (data_id, group_id, tenant_id, datum_id)
);

CREATE TABLE IF NOT EXISTS config_info_beta (
  id bigserial PRIMARY KEY,
  data_id varchar(255) NOT NULL,
  group_id varchar(128) NOT NULL,
  app_name varchar(128),
  content text NOT NULL,
  beta_ips varchar(1024),
  md5 varchar(32),
  gmt_create timestamp(3) NOT NULL DEFAULT (now() AT TIME ZONE 'UTC'),
  gmt_modified timestamp(3) NOT NULL DEFAULT (now() AT TIME ZONE 'UTC'),
  src_user text,
  src_ip varchar(50),
  tenant_id varchar(128) NOT NULL DEFAULT '',
  encrypted_data_key varchar(1024) NOT NULL DEFAULT '',
  CONSTRAINT uk_configinfobeta_datagrouptenant UNIQUE (data_id, group_id, tenant_id)
);

CREATE TABLE IF NOT EXISTS config_info_tag (
  id bigserial PRIMARY KEY,
  data_id varchar(255) NOT NULL,
  group_id varchar(128) NOT NULL,
  tenant_id varchar(128) NOT NULL DEFAULT '',
  tag_id varchar(128) NOT NULL,
  app_name varchar(128),
  content text NOT NULL,
  md5 varchar(32),
  gmt_create timestamp(3) NOT NULL DEFAULT (now() AT TIME ZONE 'UTC'),
  gmt_modified timestamp(3) NOT NULL DEFAULT (now() AT TIME ZONE 'UTC'),
  src_user text,
  src_ip varchar(50),
  CONSTRAINT uk_configinfotag_datagrouptenanttag UNIQUE (data_id, group_id, tenant_id, tag_id)
);

CREATE TABLE IF NOT EXISTS config_tags_relation (
  id bigint NOT NULL,
  tag_name varchar(128) NOT NULL,
  tag_type varchar(64),
  data_id varchar(255) NOT NULL,
  group_id varchar(128) NOT NULL,
  tenant_id varchar(128) NOT NULL DEFAULT '',
  nid bigserial PRIMARY KEY,
  CONSTRAINT uk_configtagrelation_configidtag UNIQUE (id, tag_name, tag_type)
);
CREATE INDEX IF NOT EXISTS idx_tags_relation_tenant_id ON config_tags_relation (tenant_id);

CREATE TABLE IF NOT EXISTS group_capacity (
  id bigserial PRIMARY KEY,
  group_id varchar(128) NOT NULL DEFAULT '',
  quota integer NOT NULL DEFAULT 0,
  usage integer NOT NULL DEFAULT 0,
  max_size integer NOT NULL DEFAULT 0,
  max_aggr_count integer NOT NULL DEFAULT 0,
  max_aggr_size integer NOT NULL DEFAULT 0,
  max_history_count integer NOT NULL DEFAULT 0,
  gmt_create timestamp(3) NOT NULL DEFAULT (now() AT TIME ZONE 'UTC'),
  gmt_modified timestamp(3) NOT NULL DEFAULT (now() AT TIME ZONE 'UTC'),
  CONSTRAINT uk_group_id UNIQUE (group_id)
);

CREATE TABLE IF NOT EXISTS his_config_info (
  id bigint NOT NULL,
  nid bigserial PRIMARY KEY,
  data_id varchar(255) NOT NULL,
  group_id varchar(128) NOT NULL,
  app_name varchar(128),
  content text NOT NULL,
  md5 varchar(32),
  gmt_create timestamp(3) NOT NULL DEFAULT (now() AT TIME ZONE 'UTC'),
  gmt_modified timestamp(3) NOT NULL DEFAULT (now() AT TIME ZONE 'UTC'),
  src_user text,
  src_ip varchar(50),
  op_type char(10),
  tenant_id varchar(128) NOT NULL DEFAULT '',
  encrypted_data_key varchar(1024) NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS idx_his_gmt_create ON his_config_info (gmt_create);
CREATE INDEX IF NOT EXISTS idx_his_gmt_modified ON his_config_info (gmt_modified);
CREATE INDEX IF NOT EXISTS idx_his_did ON his_config_info (data_id);

CREATE TABLE IF NOT EXISTS tenant_capacity (
  id bigserial PRIMARY KEY,
  tenant_id varchar(128) NOT NULL DEFAULT '',
  quota integer NOT NULL DEFAULT 0,
  usage integer NOT NULL DEFAULT 0,
  max_size integer NOT NULL DEFAULT 0,
  max_aggr_count integer NOT NULL DEFAULT 0,
  max_aggr_size integer NOT NULL DEFAULT 0,
  max_history_count integer NOT NULL DEFAULT 0,
  gmt_create timestamp(3) NOT NULL DEFAULT (now() AT TIME ZONE 'UTC'),
  gmt_modified timestamp(3) NOT NULL DEFAULT (now() AT TIME ZONE 'UTC'),
  CONSTRAINT uk_tenant_id UNIQUE (tenant_id)
);

CREATE TABLE IF NOT EXISTS tenant_info (
  id bigserial PRIMARY KEY,
  kp varchar(128) NOT NULL,
  tenant_id varchar(128) NOT NULL DEFAULT '',
  tenant_name varchar(128) DEFAULT '',
  tenant_desc varchar(256),
  create_source varchar(32),
  gmt_create bigint NOT NULL,
  gmt_modified bigint NOT NULL,
  CONSTRAINT uk_tenant_info_kptenantid UNIQUE (kp, tenant_id)
);
CREATE INDEX IF NOT EXISTS idx_tenant_info_tenant_id ON tenant_info (tenant_id);

CREATE TABLE IF NOT EXISTS users (
  username varchar(50) NOT NULL PRIMARY KEY,
  password varchar(500) NOT NULL,
  enabled boolean NOT NULL
);

CREATE TABLE IF NOT EXISTS roles (
  username varchar(50) NOT NULL,
  role varchar(50) NOT NULL,
  CONSTRAINT idx_user_role UNIQUE (username, role)
);

CREATE TABLE IF NOT EXISTS permissions (
  role varchar(50) NOT NULL,
  resource varchar(128) NOT NULL,
  action varchar(8) NOT NULL,
  CONSTRAINT uk_role_permission UNIQUE (role, resource, action)
);
