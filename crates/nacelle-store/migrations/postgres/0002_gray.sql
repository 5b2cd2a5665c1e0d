-- Gray release: Nacos 2.5/3.0's config_info_gray (created when absent), and Nacelle's
-- change log and history of gray writes.

CREATE TABLE IF NOT EXISTS config_info_gray (
  id bigserial PRIMARY KEY,
  data_id varchar(255) NOT NULL,
  group_id varchar(128) NOT NULL,
  content text NOT NULL,
  md5 varchar(32),
  src_user text,
  src_ip varchar(100),
  gmt_create timestamp(3) NOT NULL DEFAULT (now() AT TIME ZONE 'UTC'),
  gmt_modified timestamp(3) NOT NULL DEFAULT (now() AT TIME ZONE 'UTC'),
  app_name varchar(128),
  tenant_id varchar(128) NOT NULL DEFAULT '',
  gray_name varchar(128) NOT NULL,
  gray_rule text NOT NULL,
  encrypted_data_key varchar(256) NOT NULL DEFAULT ''
);
CREATE UNIQUE INDEX IF NOT EXISTS uk_configinfogray_datagrouptenantgray
  ON config_info_gray (data_id, group_id, tenant_id, gray_name);
CREATE INDEX IF NOT EXISTS idx_config_info_gray_gmt_modified ON config_info_gray (gmt_modified);

CREATE TABLE IF NOT EXISTS nacelle_gray_log (
  nid bigserial PRIMARY KEY,
  id bigint NOT NULL,
  data_id varchar(255) NOT NULL,
  group_id varchar(128) NOT NULL,
  tenant_id varchar(128) NOT NULL DEFAULT '',
  gray_name varchar(128) NOT NULL,
  gray_rule text NOT NULL,
  app_name varchar(128),
  content text NOT NULL,
  md5 varchar(32),
  gmt_create timestamp(3) NOT NULL,
  gmt_modified timestamp(3) NOT NULL,
  src_user text,
  src_ip varchar(50),
  op_type char(10),
  encrypted_data_key varchar(1024) NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS idx_nacelle_gray_log_key
  ON nacelle_gray_log (data_id, group_id, tenant_id, gray_name);
