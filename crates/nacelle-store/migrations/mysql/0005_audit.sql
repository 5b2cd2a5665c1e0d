-- Governed changes: the message and change request of a history row, and the audit trail
-- (docs/audit.md). Nacelle's own tables; Nacos's are not touched.

CREATE TABLE IF NOT EXISTS `nacelle_history_note` (
  `nid` bigint NOT NULL PRIMARY KEY,
  `message` text NOT NULL,
  `change_id` bigint DEFAULT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS `nacelle_audit` (
  `seq` bigint NOT NULL PRIMARY KEY,
  `time_ms` bigint NOT NULL,
  `user_name` varchar(255) NOT NULL DEFAULT '',
  `address` varchar(128) NOT NULL DEFAULT '',
  `protocol` varchar(64) NOT NULL DEFAULT '',
  `action` varchar(64) NOT NULL,
  `target` text NOT NULL,
  `outcome` text NOT NULL,
  `detail` text NOT NULL,
  `change_id` bigint DEFAULT NULL,
  `prev_hash` varchar(64) NOT NULL,
  `hash` varchar(64) NOT NULL,
  KEY `idx_nacelle_audit_time` (`time_ms`),
  KEY `idx_nacelle_audit_user` (`user_name`),
  KEY `idx_nacelle_audit_action` (`action`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS `nacelle_audit_head` (
  `id` int NOT NULL PRIMARY KEY,
  `last_seq` bigint NOT NULL,
  `last_hash` varchar(64) NOT NULL,
  `anchor_seq` bigint NOT NULL,
  `anchor_hash` varchar(64) NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

INSERT IGNORE INTO `nacelle_audit_head` (`id`, `last_seq`, `last_hash`, `anchor_seq`, `anchor_hash`)
VALUES (1, 0, '0000000000000000000000000000000000000000000000000000000000000000', 0,
        '0000000000000000000000000000000000000000000000000000000000000000');
