//! What the backends check and run of a schema: the columns an existing database must
//! have (Nacelle never alters Nacos's tables), and schema scripts split into statements.

/// The columns Nacelle reads and writes, per table. An existing database must have them
/// all; Nacos 2.4 (and 2.1 and later) does.
pub(crate) const REQUIRED_COLUMNS: &[(&str, &[&str])] = &[
    (
        "config_info",
        &[
            "id",
            "data_id",
            "group_id",
            "content",
            "md5",
            "gmt_create",
            "gmt_modified",
            "src_user",
            "src_ip",
            "app_name",
            "tenant_id",
            "c_desc",
            "c_use",
            "effect",
            "type",
            "c_schema",
            "encrypted_data_key",
        ],
    ),
    (
        "his_config_info",
        &[
            "id",
            "nid",
            "data_id",
            "group_id",
            "app_name",
            "content",
            "md5",
            "gmt_create",
            "gmt_modified",
            "src_user",
            "src_ip",
            "op_type",
            "tenant_id",
            "encrypted_data_key",
        ],
    ),
    (
        "config_tags_relation",
        &[
            "id",
            "tag_name",
            "tag_type",
            "data_id",
            "group_id",
            "tenant_id",
            "nid",
        ],
    ),
    (
        "tenant_info",
        &[
            "id",
            "kp",
            "tenant_id",
            "tenant_name",
            "tenant_desc",
            "create_source",
            "gmt_create",
            "gmt_modified",
        ],
    ),
];

/// Given the `(table, column)` pairs the database has, names the required ones it lacks,
/// as `table.column`.
pub(crate) fn missing_columns(present: &[(String, String)]) -> Vec<String> {
    let mut missing = Vec::new();
    for (table, cols) in REQUIRED_COLUMNS {
        for col in *cols {
            let found = present
                .iter()
                .any(|(t, c)| t.eq_ignore_ascii_case(table) && c.eq_ignore_ascii_case(col));
            if !found {
                missing.push(format!("{table}.{col}"));
            }
        }
    }
    missing
}

/// Splits a schema script into statements at lines ending in `;`. Our scripts keep every
/// `;` at the end of a line and none inside strings or comments.
pub(crate) fn statements(script: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for line in script.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("--") || trimmed.is_empty() {
            continue;
        }
        cur.push_str(line);
        cur.push('\n');
        if trimmed.ends_with(';') {
            out.push(std::mem::take(&mut cur));
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_columns_are_named() {
        let mut present: Vec<(String, String)> = REQUIRED_COLUMNS
            .iter()
            .flat_map(|(t, cols)| cols.iter().map(|c| (t.to_uppercase(), c.to_string())))
            .collect();
        assert!(missing_columns(&present).is_empty());
        present.retain(|(_, c)| c != "encrypted_data_key");
        assert_eq!(
            missing_columns(&present),
            vec![
                "config_info.encrypted_data_key".to_string(),
                "his_config_info.encrypted_data_key".to_string()
            ]
        );
    }

    #[test]
    fn scripts_split_at_line_ends() {
        let s = "-- comment;\nCREATE TABLE a (\n  x INT\n);\n\nCREATE TABLE b (y INT);\n";
        let st = statements(s);
        assert_eq!(st.len(), 2);
        assert!(st[0].starts_with("CREATE TABLE a"));
        assert!(st[1].starts_with("CREATE TABLE b"));
    }
}
