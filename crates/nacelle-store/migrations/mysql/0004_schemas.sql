-- JSON Schemas of config keys (docs/schema-validation.md): a schema applies to the keys of
-- one namespace (tenant_id, '' = public) whose group and dataId match its two patterns
-- (exact, `*`, `x*`, `*x`, `*x*`). Times in ms since the epoch.

CREATE TABLE IF NOT EXISTS `nacelle_config_schema` (
  `id` bigint unsigned NOT NULL AUTO_INCREMENT,
  `tenant_id` varchar(128) NOT NULL DEFAULT '',
  `group_pattern` varchar(128) NOT NULL,
  `data_id_pattern` varchar(255) NOT NULL,
  `schema_json` mediumtext NOT NULL,
  `description` varchar(256) NOT NULL DEFAULT '',
  `src_user` varchar(128) NOT NULL DEFAULT '',
  `gmt_modified` bigint NOT NULL,
  PRIMARY KEY (`id`),
  UNIQUE KEY `uk_nacelle_config_schema` (`tenant_id`, `group_pattern`, `data_id_pattern`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
