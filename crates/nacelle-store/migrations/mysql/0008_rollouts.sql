-- Staged rollouts (docs/rollouts.md): a new content of one key, its plan (JSON), where it
-- is, and the lease of the node driving it. Nacelle's own table; times are ms since the
-- epoch. `active_key` is the key's md5 while the rollout is running or paused and `#<id>`
-- after, so its unique index allows one active rollout per key across the cluster.

CREATE TABLE IF NOT EXISTS `nacelle_rollout` (
  `id` bigint NOT NULL AUTO_INCREMENT PRIMARY KEY,
  `tenant_id` varchar(128) NOT NULL DEFAULT '',
  `group_id` varchar(128) NOT NULL,
  `data_id` varchar(255) NOT NULL,
  `content` longtext NOT NULL,
  `config_type` varchar(64) NOT NULL,
  `base_md5` varchar(32) NOT NULL,
  `plan` text NOT NULL,
  `state` varchar(16) NOT NULL,
  `step` bigint NOT NULL DEFAULT 0,
  `step_started_ms` bigint NOT NULL,
  `advanced_to` bigint NOT NULL DEFAULT -1,
  `reason` text NOT NULL,
  `lease_holder` varchar(128) NOT NULL DEFAULT '',
  `lease_until_ms` bigint NOT NULL DEFAULT 0,
  `author` varchar(128) NOT NULL,
  `active_key` varchar(64) NOT NULL,
  `version` bigint NOT NULL,
  `created_ms` bigint NOT NULL,
  `updated_ms` bigint NOT NULL,
  UNIQUE KEY `uk_nacelle_rollout_active` (`active_key`),
  KEY `idx_nacelle_rollout_state` (`state`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- The note (message, change request) of a gray change-log row, keyed by its `nid`, as
-- `nacelle_history_note` is for `his_config_info`: what a rollout's step publishes say.
CREATE TABLE IF NOT EXISTS `nacelle_gray_note` (
  `nid` bigint NOT NULL PRIMARY KEY,
  `message` text NOT NULL,
  `change_id` bigint DEFAULT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
