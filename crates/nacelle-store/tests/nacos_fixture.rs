//! Nacelle on an existing Nacos 2.4 MySQL database: tables created by Nacos's schema
//! (`fixtures/nacos-2.4-mysql.sql`) and filled the way Java Nacos fills them are served
//! correctly, rows Nacelle writes there look like Java Nacos's, Nacos's tables are never
//! altered, and the tables Nacelle creates itself match Nacos's column for column.

use std::collections::BTreeMap;

use anyhow::{ensure, Context};
use bytes::Bytes;
use nacelle_core::store::RemoveOutcome;
use nacelle_core::{
    md5_hex, ConfigKey, ConfigMeta, ConfigType, Namespace, OpSource, PublishRecord, StoreError,
};
use nacelle_testkit::per_backend::skipped;
use nacelle_testkit::{Backend, TestDb};
use sqlx::mysql::MySqlRow;
use sqlx::{Executor, MySqlConnection, Row};

type TestResult = anyhow::Result<()>;

const NACOS_DDL: &str = include_str!("fixtures/nacos-2.4-mysql.sql");
/// `config_info_gray` as Nacos 2.5 creates it.
const NACOS_GRAY_DDL: &str = include_str!("fixtures/nacos-2.5-config-info-gray.sql");

const V1: &str = "server:\n  port: 80\n";
const V2: &str = "server:\n  port: 8080\n";
const DB_PROPS: &str = "url=jdbc:mysql://db:3306/shop\r\nuser=shop\r\n";

/// 2024-05-01 10:00:00 UTC and 2024-05-02 11:30:15 UTC, in ms.
const CREATED_MS: i64 = 1_714_557_600_000;
const MODIFIED_MS: i64 = 1_714_649_415_000;

/// A `config_info` row of the fixture.
type ConfigRow = (
    i64,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
);

/// Runs a script split at line ends (every `;` of our fixtures ends a line).
async fn run_script(conn: &mut MySqlConnection, script: &str) -> anyhow::Result<()> {
    let mut cur = String::new();
    for line in script.lines() {
        let t = line.trim();
        if t.is_empty() || t.starts_with("--") {
            continue;
        }
        cur.push_str(line);
        cur.push('\n');
        if t.ends_with(';') {
            conn.execute(cur.as_str()).await?;
            cur.clear();
        }
    }
    Ok(())
}

/// Creates Nacos's tables and fills them as a Java Nacos 2.4 server would have: configs
/// written with NOW() (DATETIME wall-clock time, here UTC), md5 lowercase hex, tenant_id ''
/// for the default namespace, history rows 'I' with id 0 and 'U' with the config's id
/// holding the replaced content, tag relations with tag_type NULL, and a namespace in
/// tenant_info with bigint ms times. `App.yaml` has no history left (Nacos purges history
/// after 30 days), so its revision is 0.
async fn nacos_database(backend: Backend) -> anyhow::Result<(TestDb, MySqlConnection)> {
    let db = TestDb::create(backend).await?;
    let mut conn = db.mysql().await?;
    run_script(&mut conn, NACOS_DDL).await?;
    // id, data_id, tenant, content, type, app_name, desc, encrypted_data_key
    let configs: [ConfigRow; 4] = [
        (1, "app.yaml", "", V2, "yaml", "shop", "shop settings", ""),
        (
            2,
            "db.properties",
            "dev",
            DB_PROPS,
            "properties",
            "",
            "",
            "",
        ),
        (
            3,
            "cipher-aes-secret",
            "",
            "U2FsdGVk",
            "text",
            "",
            "",
            "a2V5LWRhdGE=",
        ),
        (4, "App.yaml", "", "case: upper\n", "yaml", "", "", ""),
    ];
    for (id, data_id, tenant, content, ty, app, desc, edk) in configs {
        sqlx::query(
            "INSERT INTO config_info (id, data_id, group_id, content, md5, gmt_create, \
             gmt_modified, src_user, src_ip, app_name, tenant_id, c_desc, c_use, effect, type, \
             c_schema, encrypted_data_key) VALUES (?, ?, 'DEFAULT_GROUP', ?, ?, \
             '2024-05-01 10:00:00', '2024-05-02 11:30:15', 'nacos', '192.168.1.10', ?, ?, ?, \
             NULL, NULL, ?, NULL, ?)",
        )
        .bind(id)
        .bind(data_id)
        .bind(content)
        .bind(md5_hex(content.as_bytes()))
        .bind(app)
        .bind(tenant)
        .bind(if desc.is_empty() { None } else { Some(desc) })
        .bind(ty)
        .bind(edk)
        .execute(&mut conn)
        .await?;
    }
    for tag in ["web", "prod"] {
        sqlx::query(
            "INSERT INTO config_tags_relation (id, tag_name, tag_type, data_id, group_id, \
             tenant_id) VALUES (1, ?, NULL, 'app.yaml', 'DEFAULT_GROUP', '')",
        )
        .bind(tag)
        .execute(&mut conn)
        .await?;
    }
    let history: [(i64, &str, &str, &str, &str, &str); 4] = [
        (0, "app.yaml", "", V1, "I", "2024-05-01 10:00:00"),
        (
            0,
            "db.properties",
            "dev",
            DB_PROPS,
            "I",
            "2024-05-01 10:00:00",
        ),
        (1, "app.yaml", "", V1, "U", "2024-05-02 11:30:15"),
        (
            0,
            "cipher-aes-secret",
            "",
            "U2FsdGVk",
            "I",
            "2024-05-01 10:00:00",
        ),
    ];
    for (id, data_id, tenant, content, op, at) in history {
        sqlx::query(
            "INSERT INTO his_config_info (id, data_id, group_id, tenant_id, app_name, content, \
             md5, src_ip, src_user, gmt_modified, op_type, encrypted_data_key) \
             VALUES (?, ?, 'DEFAULT_GROUP', ?, '', ?, ?, '192.168.1.10', 'nacos', ?, ?, '')",
        )
        .bind(id)
        .bind(data_id)
        .bind(tenant)
        .bind(content)
        .bind(md5_hex(content.as_bytes()))
        .bind(at)
        .bind(op)
        .execute(&mut conn)
        .await?;
    }
    // A beta and a tag of app.yaml, as Nacos 2.4 writes them (`insertOrUpdateBeta`,
    // `insertOrUpdateTag`).
    sqlx::query(
        "INSERT INTO config_info_beta (data_id, group_id, tenant_id, app_name, content, md5, \
         beta_ips, src_ip, src_user, gmt_create, gmt_modified, encrypted_data_key) VALUES \
         ('app.yaml', 'DEFAULT_GROUP', '', 'shop', ?, ?, '10.0.0.7,10.0.0.8', '192.168.1.10', \
         'nacos', '2024-05-01 10:00:00', '2024-05-02 11:30:15', '')",
    )
    .bind("beta: on\n")
    .bind(md5_hex(b"beta: on\n"))
    .execute(&mut conn)
    .await?;
    sqlx::query(
        "INSERT INTO config_info_tag (data_id, group_id, tenant_id, tag_id, app_name, content, \
         md5, src_ip, src_user, gmt_create, gmt_modified) VALUES ('app.yaml', 'DEFAULT_GROUP', \
         '', 'blue', 'shop', ?, ?, '192.168.1.10', 'nacos', '2024-05-01 10:00:00', \
         '2024-05-02 11:30:15')",
    )
    .bind("tag: blue\n")
    .bind(md5_hex(b"tag: blue\n"))
    .execute(&mut conn)
    .await?;
    sqlx::query(
        "INSERT INTO tenant_info (kp, tenant_id, tenant_name, tenant_desc, create_source, \
         gmt_create, gmt_modified) VALUES ('1', 'dev', 'Development', 'dev env', 'nacos', ?, ?)",
    )
    .bind(CREATED_MS)
    .bind(CREATED_MS)
    .execute(&mut conn)
    .await?;
    Ok((db, conn))
}

/// A text column of a raw row (Nacos's utf8_bin columns are flagged binary; decode as text).
fn s(row: &MySqlRow, col: &str) -> anyhow::Result<Option<String>> {
    Ok(row.try_get_unchecked::<Option<String>, _>(col)?)
}

async fn show_create(conn: &mut MySqlConnection) -> anyhow::Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for table in [
        "config_info",
        "config_info_aggr",
        "config_info_beta",
        "config_info_tag",
        "config_tags_relation",
        "group_capacity",
        "his_config_info",
        "tenant_capacity",
        "tenant_info",
        "users",
        "roles",
        "permissions",
    ] {
        let row = conn
            .fetch_one(format!("SHOW CREATE TABLE `{table}`").as_str())
            .await?;
        let ddl: String = row.try_get_unchecked(1)?;
        // The auto-increment counter moves with every insert; the definition must not.
        let ddl = ddl
            .split_whitespace()
            .filter(|w| !w.starts_with("AUTO_INCREMENT="))
            .collect::<Vec<_>>()
            .join(" ");
        out.insert(table.to_string(), ddl);
    }
    Ok(out)
}

fn key(tenant: &str, data_id: &str) -> ConfigKey {
    ConfigKey::from_trusted(tenant, "DEFAULT_GROUP", data_id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_rows_written_by_nacos() -> TestResult {
    if skipped(Backend::MariaDb) {
        return Ok(());
    }
    let (db, mut conn) = nacos_database(Backend::MariaDb).await?;
    let before = show_create(&mut conn).await?;
    let store = nacelle_store::open(&format!("{}?timezone=%2B00:00", db.url)).await?;
    assert_eq!(
        show_create(&mut conn).await?,
        before,
        "Nacos's tables were altered"
    );
    let version: i64 = sqlx::query_scalar("SELECT MAX(version) FROM nacelle_schema_version")
        .fetch_one(&mut conn)
        .await?;
    // The newest schema script: 8, staged rollouts.
    assert_eq!(version, 8);

    // Nacos 2.4's beta and tag rows of app.yaml are served as the beta and tag variants.
    let grays = store.grays_of(&key("", "app.yaml")).await?;
    let view: Vec<(&str, &str, &str, i32, &[u8])> = grays
        .iter()
        .map(|g| {
            (
                g.name.as_str(),
                g.rule_type.as_str(),
                g.rule_expr.as_str(),
                g.priority,
                &g.config.content[..],
            )
        })
        .collect();
    assert_eq!(
        view,
        vec![
            (
                "beta",
                "beta",
                "10.0.0.7,10.0.0.8",
                i32::MAX,
                b"beta: on\n".as_slice()
            ),
            (
                "tag_blue",
                "tag",
                "blue",
                i32::MAX - 1,
                b"tag: blue\n".as_slice()
            ),
        ]
    );
    assert_eq!(grays[0].config.md5, md5_hex(b"beta: on\n"));
    assert_eq!(grays[0].config.modified_ms, MODIFIED_MS);
    assert_eq!(store.load_grays().await?.len(), 2);

    let all = store.load_all().await?;
    assert_eq!(all.len(), 4);
    let app = store.get(&key("", "app.yaml")).await?.context("app.yaml")?;
    assert_eq!(all[0], app);
    assert_eq!(app.id, 1);
    assert_eq!(&app.content[..], V2.as_bytes());
    assert_eq!(app.md5, md5_hex(V2.as_bytes()));
    assert_eq!(app.config_type, ConfigType::Yaml);
    assert_eq!(app.created_ms, CREATED_MS);
    assert_eq!(app.modified_ms, MODIFIED_MS);
    assert_eq!(app.meta.app_name, "shop");
    assert_eq!(app.meta.desc, "shop settings");
    assert_eq!(app.meta.config_tags, "web,prod");
    assert_eq!(app.source.src_user, "nacos");
    assert_eq!(app.source.src_ip, "192.168.1.10");
    assert_eq!(app.revision, 3, "revision = newest history nid of the key");

    let props = store
        .get(&key("dev", "db.properties"))
        .await?
        .context("db.properties")?;
    assert_eq!(&props.content[..], DB_PROPS.as_bytes());
    assert_eq!(props.config_type, ConfigType::Properties);
    assert_eq!(props.revision, 2);
    assert_eq!(store.get(&key("", "db.properties")).await?, None);

    let cipher = store
        .get(&key("", "cipher-aes-secret"))
        .await?
        .context("cipher")?;
    assert_eq!(cipher.meta.encrypted_data_key, "a2V5LWRhdGE=");
    assert_eq!(cipher.revision, 4);

    let upper = store.get(&key("", "App.yaml")).await?.context("App.yaml")?;
    assert_eq!(
        &upper.content[..],
        b"case: upper\n",
        "keys are case-sensitive"
    );
    assert_eq!(upper.revision, 0, "no history left: revision 0");

    let hist = store
        .history_page(
            &key("", "app.yaml"),
            nacelle_core::PageRequest {
                page_no: 1,
                page_size: 10,
            },
        )
        .await?;
    assert_eq!(hist.total_count, 2);
    assert_eq!(hist.items[0].content, V1);
    assert_eq!(hist.items[0].modified_ms, MODIFIED_MS);
    let prev = store.history_previous(1).await?.context("previous")?;
    assert_eq!(prev.nid, 3);

    assert_eq!(
        store.list_namespaces().await?,
        vec![Namespace {
            id: nacelle_core::NamespaceId::from_trusted("dev"),
            name: "Development".into(),
            desc: "dev env".into()
        }]
    );
    let changes = store.changes_since(0, 10).await?;
    assert_eq!(changes.len(), 4);
    assert_eq!(store.max_history_nid().await?, 4);

    // The same DATETIME read in another session time zone is another instant.
    let east = nacelle_store::open(&format!("{}?timezone=%2B08:00", db.url)).await?;
    let app_east = east.get(&key("", "app.yaml")).await?.context("app.yaml")?;
    assert_eq!(app_east.modified_ms, MODIFIED_MS - 8 * 3_600_000);
    drop(conn);
    drop(db);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_rows_like_java_nacos() -> TestResult {
    if skipped(Backend::MariaDb) {
        return Ok(());
    }
    let (db, mut conn) = nacos_database(Backend::MariaDb).await?;
    let store = nacelle_store::open(&format!("{}?timezone=%2B00:00", db.url)).await?;
    let source = OpSource {
        src_user: "ops".into(),
        src_ip: "10.1.2.3".into(),
        ..OpSource::default()
    };
    // 2024-05-03 01:33:20.500 UTC.
    let now = 1_714_700_000_500;
    let v3 = "server:\n  port: 9090\n";
    let updated = store
        .publish(&PublishRecord {
            key: key("", "app.yaml"),
            content: Bytes::from(v3),
            md5: md5_hex(v3.as_bytes()),
            config_type: ConfigType::Yaml,
            meta: ConfigMeta {
                app_name: "shop".into(),
                config_tags: "web,canary".into(),
                ..Default::default()
            },
            source: source.clone(),
            cas_md5: Some(md5_hex(V2.as_bytes())),
            now_ms: now,
            gray: None,
        })
        .await?;
    assert_eq!(updated.id, 1);
    ensure!(updated.revision > 4, "nid continues Nacos's sequence");

    let row = conn
        .fetch_one(
            "SELECT content, md5, tenant_id, encrypted_data_key, type, src_user, src_ip, \
             DATE_FORMAT(gmt_create, '%Y-%m-%d %H:%i:%s') AS c, \
             DATE_FORMAT(gmt_modified, '%Y-%m-%d %H:%i:%s') AS m \
             FROM config_info WHERE id = 1",
        )
        .await?;
    assert_eq!(s(&row, "content")?.as_deref(), Some(v3));
    let md5 = s(&row, "md5")?.context("md5")?;
    assert_eq!(md5, md5_hex(v3.as_bytes()));
    ensure!(md5
        .chars()
        .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c)));
    assert_eq!(s(&row, "tenant_id")?.as_deref(), Some(""));
    assert_eq!(s(&row, "encrypted_data_key")?.as_deref(), Some(""));
    assert_eq!(s(&row, "type")?.as_deref(), Some("yaml"));
    assert_eq!(s(&row, "src_user")?.as_deref(), Some("ops"));
    assert_eq!(s(&row, "src_ip")?.as_deref(), Some("10.1.2.3"));
    assert_eq!(s(&row, "c")?.as_deref(), Some("2024-05-01 10:00:00"));
    assert_eq!(s(&row, "m")?.as_deref(), Some("2024-05-03 01:33:20"));

    let tags = conn
        .fetch_all(
            "SELECT tag_name, tag_type, data_id, group_id, tenant_id FROM config_tags_relation \
             WHERE id = 1 ORDER BY nid",
        )
        .await?;
    let tags: Vec<(Option<String>, Option<String>, Option<String>)> = tags
        .iter()
        .map(|r| Ok((s(r, "tag_name")?, s(r, "tag_type")?, s(r, "tenant_id")?)))
        .collect::<anyhow::Result<_>>()?;
    assert_eq!(
        tags,
        vec![
            (Some("web".into()), None, Some(String::new())),
            (Some("canary".into()), None, Some(String::new())),
        ]
    );

    let his = conn
        .fetch_one(
            format!(
                "SELECT CAST(id AS SIGNED) AS id, content, md5, op_type, tenant_id, app_name, \
                 src_user, src_ip, encrypted_data_key, \
                 DATE_FORMAT(gmt_create, '%Y-%m-%d %H:%i:%s') AS c, \
                 DATE_FORMAT(gmt_modified, '%Y-%m-%d %H:%i:%s') AS m \
                 FROM his_config_info WHERE nid = {}",
                updated.revision
            )
            .as_str(),
        )
        .await?;
    assert_eq!(
        his.try_get::<i64, _>("id")?,
        1,
        "U rows carry the config id"
    );
    assert_eq!(s(&his, "op_type")?.as_deref(), Some("U"));
    assert_eq!(
        s(&his, "content")?.as_deref(),
        Some(V2),
        "U rows keep the replaced content"
    );
    assert_eq!(s(&his, "md5")?, Some(md5_hex(V2.as_bytes())));
    assert_eq!(s(&his, "tenant_id")?.as_deref(), Some(""));
    assert_eq!(s(&his, "app_name")?.as_deref(), Some("shop"));
    assert_eq!(s(&his, "src_user")?.as_deref(), Some("ops"));
    assert_eq!(s(&his, "src_ip")?.as_deref(), Some("10.1.2.3"));
    assert_eq!(s(&his, "encrypted_data_key")?.as_deref(), Some(""));
    assert_eq!(s(&his, "m")?.as_deref(), Some("2024-05-03 01:33:20"));
    assert_eq!(s(&his, "c")?.as_deref(), Some("2024-05-03 01:33:20"));

    // A new config: tenant_id '' and encrypted_data_key '', never NULL; history id 0, 'I'.
    let fresh = "{\"a\":1}";
    let inserted = store
        .publish(&PublishRecord {
            key: key("", "new.json"),
            content: Bytes::from(fresh),
            md5: md5_hex(fresh.as_bytes()),
            config_type: ConfigType::Json,
            meta: ConfigMeta::default(),
            source: source.clone(),
            cas_md5: None,
            now_ms: now,
            gray: None,
        })
        .await?;
    let row = conn
        .fetch_one(
            format!(
                "SELECT tenant_id, encrypted_data_key, md5, \
                 DATE_FORMAT(gmt_create, '%Y-%m-%d %H:%i:%s') AS c, \
                 DATE_FORMAT(gmt_modified, '%Y-%m-%d %H:%i:%s') AS m \
                 FROM config_info WHERE id = {}",
                inserted.id
            )
            .as_str(),
        )
        .await?;
    assert_eq!(s(&row, "tenant_id")?.as_deref(), Some(""));
    assert_eq!(s(&row, "encrypted_data_key")?.as_deref(), Some(""));
    assert_eq!(s(&row, "md5")?, Some(md5_hex(fresh.as_bytes())));
    assert_eq!(s(&row, "c")?.as_deref(), Some("2024-05-03 01:33:20"));
    assert_eq!(s(&row, "m")?.as_deref(), Some("2024-05-03 01:33:20"));
    let his = conn
        .fetch_one(
            format!(
                "SELECT CAST(id AS SIGNED) AS id, op_type, content, tenant_id, encrypted_data_key \
                 FROM his_config_info WHERE nid = {}",
                inserted.revision
            )
            .as_str(),
        )
        .await?;
    assert_eq!(his.try_get::<i64, _>("id")?, 0, "I rows carry config id 0");
    assert_eq!(s(&his, "op_type")?.as_deref(), Some("I"));
    assert_eq!(s(&his, "content")?.as_deref(), Some(fresh));
    assert_eq!(s(&his, "tenant_id")?.as_deref(), Some(""));
    assert_eq!(s(&his, "encrypted_data_key")?.as_deref(), Some(""));

    // A delete in a namespace: 'D' with the config id and the removed content.
    let RemoveOutcome::Removed { revision } = store
        .remove(&key("dev", "db.properties"), &source, now)
        .await?
    else {
        anyhow::bail!("db.properties was absent");
    };
    let his = conn
        .fetch_one(
            format!(
                "SELECT CAST(id AS SIGNED) AS id, op_type, content, tenant_id \
                 FROM his_config_info WHERE nid = {revision}"
            )
            .as_str(),
        )
        .await?;
    assert_eq!(his.try_get::<i64, _>("id")?, 2);
    assert_eq!(s(&his, "op_type")?.as_deref(), Some("D"));
    assert_eq!(s(&his, "content")?.as_deref(), Some(DB_PROPS));
    assert_eq!(s(&his, "tenant_id")?.as_deref(), Some("dev"));
    let left: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM config_info WHERE id = 2")
        .fetch_one(&mut conn)
        .await?;
    assert_eq!(left, 0);

    // A namespace as Nacos records one.
    store
        .create_namespace(
            &Namespace {
                id: nacelle_core::NamespaceId::from_trusted("test"),
                name: "Test".into(),
                desc: "qa".into(),
            },
            now,
        )
        .await?;
    let ns = conn
        .fetch_one(
            "SELECT kp, create_source, gmt_create, gmt_modified FROM tenant_info \
             WHERE tenant_id = 'test'",
        )
        .await?;
    assert_eq!(s(&ns, "kp")?.as_deref(), Some("1"));
    assert_eq!(s(&ns, "create_source")?.as_deref(), Some("nacos"));
    assert_eq!(ns.try_get::<i64, _>("gmt_create")?, now);
    assert_eq!(ns.try_get::<i64, _>("gmt_modified")?, now);

    // Nacos's utf8 (3-byte) columns cannot hold emoji: refused as bad input (an HTTP 400,
    // not an outage), nothing written.
    let emoji = "smile 😀";
    let refused = store
        .publish(&PublishRecord {
            key: key("", "emoji.txt"),
            content: Bytes::from(emoji),
            md5: md5_hex(emoji.as_bytes()),
            config_type: ConfigType::Text,
            meta: ConfigMeta::default(),
            source,
            cas_md5: None,
            now_ms: now,
            gray: None,
        })
        .await;
    assert!(
        matches!(&refused, Err(StoreError::Rejected(m)) if m.contains("Incorrect string value")),
        "{refused:?}"
    );
    assert_eq!(store.get(&key("", "emoji.txt")).await?, None);

    // Another node (or a restart) reads back exactly what was written.
    let again = nacelle_store::open(&format!("{}?timezone=%2B00:00", db.url)).await?;
    let mut reread = again.load_all().await?;
    reread.sort_by_key(|c| c.id);
    let mut expected = store.load_all().await?;
    expected.sort_by_key(|c| c.id);
    assert_eq!(reread, expected);
    assert!(reread.contains(&updated));
    assert!(reread.contains(&inserted));
    drop(conn);
    drop(db);
    Ok(())
}

/// Column and index definitions of Nacos's tables in a database, without character sets.
async fn table_shapes(conn: &mut MySqlConnection) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    let columns = conn
        .fetch_all(
            "SELECT TABLE_NAME AS t, COLUMN_NAME AS c, COLUMN_TYPE AS ty, IS_NULLABLE AS n, \
             COALESCE(COLUMN_DEFAULT, 'NULL') AS d, EXTRA AS e \
             FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() \
             AND TABLE_NAME NOT LIKE 'nacelle%' ORDER BY TABLE_NAME, ORDINAL_POSITION",
        )
        .await?;
    for r in &columns {
        out.push(format!(
            "column {:?} {:?} {:?} {:?} {:?} {:?}",
            s(r, "t")?,
            s(r, "c")?,
            s(r, "ty")?,
            s(r, "n")?,
            s(r, "d")?,
            s(r, "e")?
        ));
    }
    let indexes = conn
        .fetch_all(
            "SELECT TABLE_NAME AS t, INDEX_NAME AS i, CAST(NON_UNIQUE AS SIGNED) AS u, \
             CAST(SEQ_IN_INDEX AS SIGNED) AS q, COLUMN_NAME AS c \
             FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() \
             AND TABLE_NAME NOT LIKE 'nacelle%' ORDER BY TABLE_NAME, INDEX_NAME, SEQ_IN_INDEX",
        )
        .await?;
    for r in &indexes {
        out.push(format!(
            "index {:?} {:?} {} {} {:?}",
            s(r, "t")?,
            s(r, "i")?,
            r.try_get::<i64, _>("u")?,
            r.try_get::<i64, _>("q")?,
            s(r, "c")?
        ));
    }
    Ok(out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn created_tables_match_nacos_column_for_column() -> TestResult {
    if skipped(Backend::MariaDb) {
        return Ok(());
    }
    let (nacos, mut nacos_conn) = nacos_database(Backend::MariaDb).await?;
    run_script(&mut nacos_conn, NACOS_GRAY_DDL).await?;
    let ours = TestDb::create(Backend::MariaDb).await?;
    drop(nacelle_store::open(&ours.url).await?);
    let mut our_conn = ours.mysql().await?;
    let expected = table_shapes(&mut nacos_conn).await?;
    let got = table_shapes(&mut our_conn).await?;
    ensure!(
        expected.len() > 100,
        "only {} definitions read",
        expected.len()
    );
    assert_eq!(got.len(), expected.len());
    for (g, e) in got.iter().zip(&expected) {
        assert_eq!(g, e);
    }
    // Ours hold 4-byte characters.
    let cs: String = sqlx::query_scalar(
        "SELECT CHARACTER_SET_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() \
         AND TABLE_NAME = 'config_info' AND COLUMN_NAME = 'content'",
    )
    .fetch_one(&mut our_conn)
    .await?;
    assert_eq!(cs, "utf8mb4");
    // Opening again changes nothing and applies no script twice.
    drop(nacelle_store::open(&ours.url).await?);
    let versions: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM nacelle_schema_version")
        .fetch_one(&mut our_conn)
        .await?;
    // Scripts 1 to 8.
    assert_eq!(versions, 8);
    drop((nacos_conn, our_conn));
    drop((nacos, ours));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_older_than_nacos_2_1_is_refused_clearly() -> TestResult {
    if skipped(Backend::MariaDb) {
        return Ok(());
    }
    let (db, mut conn) = nacos_database(Backend::MariaDb).await?;
    // Nacos before 2.1 had no encrypted_data_key (we alter our own test copy to get one).
    conn.execute("ALTER TABLE config_info DROP COLUMN encrypted_data_key")
        .await?;
    conn.execute("ALTER TABLE his_config_info DROP COLUMN encrypted_data_key")
        .await?;
    let err = nacelle_store::open(&db.url)
        .await
        .err()
        .context("opened a database without encrypted_data_key")?;
    let msg = err.to_string();
    ensure!(
        matches!(err, nacelle_store::OpenError::Schema(_))
            && msg.contains("config_info.encrypted_data_key")
            && msg.contains("his_config_info.encrypted_data_key"),
        "{msg}"
    );
    drop(conn);
    drop(db);
    Ok(())
}

/// Gray rows as Nacos 2.5/3.0 write them in `config_info_gray` are served; grays Nacelle
/// writes look like Java Nacos's: `config_info_gray` (gray name, `gray_rule` JSON in
/// Nacos's field order) and, for beta and tag, the Nacos 2.4 rows a 2.4 node reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gray_rows_are_read_and_written_as_nacos_does() -> TestResult {
    if skipped(Backend::MariaDb) {
        return Ok(());
    }
    let (db, mut conn) = nacos_database(Backend::MariaDb).await?;
    run_script(&mut conn, NACOS_GRAY_DDL).await?;
    // A Nacos 3.0 beta of db.properties (dev).
    sqlx::query(
        "INSERT INTO config_info_gray (data_id, group_id, content, md5, src_user, src_ip, \
         gmt_create, gmt_modified, app_name, tenant_id, gray_name, gray_rule, \
         encrypted_data_key) VALUES ('db.properties', 'DEFAULT_GROUP', 'a=beta', ?, 'nacos', \
         '192.168.1.10', '2024-05-01 10:00:00.000', '2024-05-02 11:30:15.000', '', 'dev', \
         'beta', ?, '')",
    )
    .bind(md5_hex(b"a=beta"))
    .bind(r#"{"type":"beta","version":"1.0.0","expr":"10.0.0.9","priority":2147483647}"#)
    .execute(&mut conn)
    .await?;
    let store = nacelle_store::open(&format!("{}?timezone=%2B00:00", db.url)).await?;
    let grays = store.grays_of(&key("dev", "db.properties")).await?;
    assert_eq!(grays.len(), 1);
    let g = &grays[0];
    assert_eq!(
        (
            g.name.as_str(),
            g.rule_type.as_str(),
            g.rule_expr.as_str(),
            g.priority
        ),
        ("beta", "beta", "10.0.0.9", i32::MAX)
    );
    assert_eq!(&g.config.content[..], b"a=beta");
    assert_eq!(g.config.modified_ms, MODIFIED_MS);

    // Nacelle writes a beta, a tag and a label rule of app.yaml.
    let source = OpSource {
        src_user: "ops".into(),
        src_ip: "10.1.1.1".into(),
        ..OpSource::default()
    };
    let gray_record = |content: &str, spec: nacelle_core::GraySpec| PublishRecord {
        key: key("", "app.yaml"),
        content: Bytes::from(content.to_string()),
        md5: md5_hex(content.as_bytes()),
        config_type: ConfigType::Yaml,
        meta: ConfigMeta {
            app_name: "shop".into(),
            ..Default::default()
        },
        source: source.clone(),
        cas_md5: None,
        now_ms: MODIFIED_MS + 60_000,
        gray: Some(spec),
    };
    store
        .publish(&gray_record(
            "b: 2\n",
            nacelle_core::GraySpec::beta("10.0.0.7")?,
        ))
        .await?;
    store
        .publish(&gray_record("t: 2\n", nacelle_core::GraySpec::tag("blue")?))
        .await?;
    store
        .publish(&gray_record(
            "l: 1\n",
            nacelle_core::GraySpec::labels("pre", "env=pre&&region=hz", Some(3))?,
        ))
        .await?;
    let rows = conn
        .fetch_all(
            "SELECT gray_name, gray_rule, content, md5, src_user, src_ip, app_name, tenant_id \
             FROM config_info_gray WHERE data_id = 'app.yaml' ORDER BY id",
        )
        .await?;
    let got: Vec<Vec<Option<String>>> = rows
        .iter()
        .map(|r| {
            [
                "gray_name",
                "gray_rule",
                "content",
                "md5",
                "src_user",
                "src_ip",
                "app_name",
                "tenant_id",
            ]
            .iter()
            .map(|c| s(r, c))
            .collect::<anyhow::Result<Vec<_>>>()
        })
        .collect::<anyhow::Result<_>>()?;
    let row = |name: &str, rule: &str, content: &str| {
        vec![
            Some(name.to_string()),
            Some(rule.to_string()),
            Some(content.to_string()),
            Some(md5_hex(content.as_bytes())),
            Some("ops".to_string()),
            Some("10.1.1.1".to_string()),
            Some("shop".to_string()),
            Some(String::new()),
        ]
    };
    assert_eq!(
        got,
        vec![
            row(
                "beta",
                r#"{"type":"beta","version":"1.0.0","expr":"10.0.0.7","priority":2147483647}"#,
                "b: 2\n"
            ),
            row(
                "tag_blue",
                r#"{"type":"tag","version":"1.0.0","expr":"blue","priority":2147483646}"#,
                "t: 2\n"
            ),
            row(
                "pre",
                r#"{"type":"tagv2","version":"1.1.0","expr":"env=pre&&region=hz","priority":3}"#,
                "l: 1\n"
            ),
        ]
    );
    // The 2.4 mirror rows: one beta, one tag, replaced (not duplicated).
    let beta = conn
        .fetch_all(
            "SELECT beta_ips, content, md5, src_ip, src_user, app_name FROM config_info_beta \
             WHERE data_id = 'app.yaml'",
        )
        .await?;
    assert_eq!(beta.len(), 1);
    assert_eq!(s(&beta[0], "beta_ips")?.as_deref(), Some("10.0.0.7"));
    assert_eq!(s(&beta[0], "content")?.as_deref(), Some("b: 2\n"));
    assert_eq!(s(&beta[0], "src_ip")?.as_deref(), Some("10.1.1.1"));
    let tags = conn
        .fetch_all("SELECT tag_id, content FROM config_info_tag WHERE data_id = 'app.yaml'")
        .await?;
    assert_eq!(tags.len(), 1);
    assert_eq!(s(&tags[0], "content")?.as_deref(), Some("t: 2\n"));
    // Served: the gray rows (newer than the 2.4 rows they replaced).
    let names: Vec<String> = store
        .grays_of(&key("", "app.yaml"))
        .await?
        .into_iter()
        .map(|g| format!("{}={}", g.name, String::from_utf8_lossy(&g.config.content)))
        .collect();
    assert_eq!(names, ["beta=b: 2\n", "tag_blue=t: 2\n", "pre=l: 1\n"]);
    // The gray change log has one row per write.
    assert_eq!(store.gray_changes_since(0, 10).await?.len(), 3);

    // Stopping the beta removes it from both tables.
    store
        .remove_gray(&key("", "app.yaml"), "beta", &source, MODIFIED_MS + 120_000)
        .await?;
    let left: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM config_info_beta WHERE data_id = 'app.yaml'")
            .fetch_one(&mut conn)
            .await?;
    assert_eq!(left, 0);
    drop(conn);
    drop(db);
    Ok(())
}

/// On a Nacos 2.5/3.0 database (`his_config_info` with `publish_type`, `gray_name`,
/// `ext_info`), a gray write is also recorded there as Nacos records it — `publish_type
/// 'gray'`, the gray's name, `ext_info` with its rule — while formal history listings,
/// revisions and the purge see only formal rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gray_writes_are_in_his_config_info_on_a_nacos_3_database() -> TestResult {
    if skipped(Backend::MariaDb) {
        return Ok(());
    }
    let (db, mut conn) = nacos_database(Backend::MariaDb).await?;
    run_script(&mut conn, NACOS_GRAY_DDL).await?;
    // Nacos 2.5's upgrade of his_config_info.
    conn.execute(
        "ALTER TABLE his_config_info ADD COLUMN publish_type varchar(50) DEFAULT 'formal', \
         ADD COLUMN gray_name varchar(50) DEFAULT NULL, ADD COLUMN ext_info longtext DEFAULT NULL",
    )
    .await?;
    let store = nacelle_store::open(&format!("{}?timezone=%2B00:00", db.url)).await?;
    let k = key("", "app.yaml");
    let before = store.get(&k).await?.context("app.yaml")?;
    let formal_history = store
        .history_page(
            &k,
            nacelle_core::PageRequest {
                page_no: 1,
                page_size: 100,
            },
        )
        .await?
        .total_count;
    let source = OpSource {
        src_user: "ops".into(),
        src_ip: "10.1.1.1".into(),
        ..OpSource::default()
    };
    let beta = PublishRecord {
        key: k.clone(),
        content: Bytes::from_static(b"b: 2\n"),
        md5: md5_hex(b"b: 2\n"),
        config_type: ConfigType::Yaml,
        meta: ConfigMeta {
            app_name: "shop".into(),
            ..Default::default()
        },
        source: source.clone(),
        cas_md5: None,
        now_ms: MODIFIED_MS + 60_000,
        gray: Some(nacelle_core::GraySpec::beta("10.0.0.7,10.0.0.8")?),
    };
    store.publish(&beta).await?;
    store
        .remove_gray(&k, "beta", &source, MODIFIED_MS + 120_000)
        .await?;

    let rows = conn
        .fetch_all(
            "SELECT op_type, publish_type, gray_name, ext_info, content, src_user FROM \
             his_config_info WHERE data_id = 'app.yaml' AND publish_type = 'gray' ORDER BY nid",
        )
        .await?;
    let mut got: Vec<[String; 6]> = Vec::new();
    for r in &rows {
        let mut row: [String; 6] = Default::default();
        let cols = [
            "op_type",
            "publish_type",
            "gray_name",
            "ext_info",
            "content",
            "src_user",
        ];
        for (i, c) in cols.iter().enumerate() {
            row[i] = s(r, c)?.unwrap_or_default();
        }
        got.push(row);
    }
    let ext = r#"{"gray_name":"beta","src_user":"ops","gray_rule":"{\"type\":\"beta\",\"expr\":\"10.0.0.7,10.0.0.8\",\"version\":\"1.0.0\",\"priority\":\"2147483647\"}"}"#;
    assert_eq!(
        got,
        vec![
            ["I", "gray", "beta", ext, "b: 2\n", "ops"].map(String::from),
            ["D", "gray", "beta", ext, "b: 2\n", "ops"].map(String::from),
        ]
    );
    // Formal history and the formal revision ignore the gray rows.
    let after = store.get(&k).await?.context("app.yaml")?;
    assert_eq!(after.revision, before.revision);
    let page = store
        .history_page(
            &k,
            nacelle_core::PageRequest {
                page_no: 1,
                page_size: 100,
            },
        )
        .await?;
    assert_eq!(page.total_count, formal_history);
    assert!(page.items.iter().all(|h| h.content != "b: 2\n"));
    // A formal write still lists as formal (the column default).
    let formal = PublishRecord {
        gray: None,
        content: Bytes::from_static(b"f: 3\n"),
        md5: md5_hex(b"f: 3\n"),
        ..beta
    };
    let stored = store.publish(&formal).await?;
    assert!(stored.revision > after.revision);
    let kinds: Vec<String> = conn
        .fetch_all(
            "SELECT publish_type FROM his_config_info WHERE data_id = 'app.yaml' ORDER BY nid",
        )
        .await?
        .iter()
        .map(|r| s(r, "publish_type").map(Option::unwrap_or_default))
        .collect::<anyhow::Result<_>>()?;
    assert_eq!(kinds.last().map(String::as_str), Some("formal"));
    // The purge keeps the newest formal row, and the newest gray row of each gray name
    // (here the beta's stop), although they are old: formal and gray rows are purged
    // each among their own kind.
    let rule = nacelle_core::HistoryRetention {
        older_than_ms: Some(nacelle_core::now_millis()),
        keep_per_key: None,
    };
    let mut after_nid = 0;
    loop {
        let step = store
            .purge_history(nacelle_core::HistoryLog::Configs, &rule, after_nid, 100)
            .await?;
        match step.resume_after {
            Some(n) => after_nid = n,
            None => break,
        }
    }
    let newest = store
        .history_page(
            &k,
            nacelle_core::PageRequest {
                page_no: 1,
                page_size: 100,
            },
        )
        .await?;
    assert_eq!(newest.total_count, 1);
    assert_eq!(newest.items[0].nid, stored.revision);
    assert_eq!(
        store.get(&k).await?.map(|c| c.revision),
        Some(stored.revision)
    );
    let grays_left = conn
        .fetch_all(
            "SELECT op_type FROM his_config_info WHERE data_id = 'app.yaml' AND \
             publish_type = 'gray' ORDER BY nid",
        )
        .await?
        .iter()
        .map(|r| s(r, "op_type").map(Option::unwrap_or_default))
        .collect::<anyhow::Result<Vec<_>>>()?;
    assert_eq!(grays_left, ["D"], "the beta's insert went, its stop stays");
    drop(conn);
    drop(db);
    Ok(())
}
