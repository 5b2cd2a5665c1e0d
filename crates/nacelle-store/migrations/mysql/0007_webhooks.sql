-- Webhooks (docs/webhooks.md) and their durable deliveries. Nacelle's own tables; times
-- are ms since the epoch. A pending delivery is claimed by one sender at a time: the
-- claim sets lease_owner and lease_until_ms by a compare-and-set UPDATE.

CREATE TABLE IF NOT EXISTS `nacelle_webhook` (
  `id` bigint NOT NULL AUTO_INCREMENT PRIMARY KEY,
  `tenant_id` varchar(128) NOT NULL DEFAULT '',
  `group_pattern` varchar(128) NOT NULL,
  `data_id_pattern` varchar(255) NOT NULL,
  `url` varchar(1024) NOT NULL,
  `secret` varchar(256) NOT NULL,
  `events` varchar(1024) NOT NULL DEFAULT '',
  `enabled` bigint NOT NULL DEFAULT 1,
  `description` varchar(256) NOT NULL DEFAULT '',
  `created_by` varchar(128) NOT NULL DEFAULT '',
  `created_ms` bigint NOT NULL,
  `updated_ms` bigint NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS `nacelle_webhook_delivery` (
  `id` bigint NOT NULL AUTO_INCREMENT PRIMARY KEY,
  `hook_id` bigint NOT NULL,
  `event_id` varchar(64) NOT NULL,
  `kind` varchar(32) NOT NULL,
  `body` mediumtext NOT NULL,
  `status` varchar(16) NOT NULL,
  `attempts` bigint NOT NULL DEFAULT 0,
  `last_code` bigint NOT NULL DEFAULT 0,
  `last_error` varchar(1024) NOT NULL DEFAULT '',
  `next_attempt_ms` bigint NOT NULL,
  `lease_owner` varchar(64) NOT NULL DEFAULT '',
  `lease_until_ms` bigint NOT NULL DEFAULT 0,
  `created_ms` bigint NOT NULL,
  `updated_ms` bigint NOT NULL,
  KEY `idx_nacelle_webhook_delivery_due` (`status`, `next_attempt_ms`),
  KEY `idx_nacelle_webhook_delivery_hook` (`hook_id`, `id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
