//! Change requests and review policies (`nacelle_change`, `nacelle_change_item`,
//! `nacelle_change_event`, `nacelle_review_policy`): their statements, spelled once per
//! dialect; reads and the small writes (create, update, policies) on a sqlx pool, shared by
//! every backend; and the publish of a change request, a step of the one write executor
//! (`write.rs`), so it runs in the SQLite writer's group transaction or a sqlx transaction
//! like every other config write.

use std::sync::Arc;

use async_trait::async_trait;
use nacelle_core::change::{
    ChangeEvent, ChangeEventKind, ChangeFilter, ChangeId, ChangeItem, ChangeOp,
    ChangePublishOutcome, ChangeRequest, ChangeState, ChangeUpdate, ChangeWrite, ChangeWritten,
    NewChange, NewChangeEvent, ReviewPolicy,
};
use nacelle_core::{ConfigType, NamespaceId, Page, PageRequest, StoreError};
use sqlx::Pool;

use crate::dialect::{spell, Arg, Dialect};
use crate::map_err;
use crate::plan::{plan_publish, plan_remove};
use crate::queries::{Param, Queries, Returns, Statement};
use crate::sql::{self, Exec};
use crate::write::{self, Step, WriteConn};

/// The columns of a change request row.
const CHANGE_COLUMNS: &str = "id, tenant_id, title, description, author, state, stale, \
    version, created_ms, updated_ms, publish_at_ms";

/// The statements of change requests and policies, spelled by one dialect.
#[derive(Debug, Clone)]
pub(crate) struct ChangeQueries {
    pub(crate) insert_change: String,
    pub(crate) insert_item: String,
    pub(crate) insert_event: String,
    pub(crate) get_change: String,
    pub(crate) items_of: String,
    pub(crate) events_of: String,
    pub(crate) count: String,
    pub(crate) list: String,
    pub(crate) bump: String,
    pub(crate) set_fields: String,
    pub(crate) delete_items: String,
    pub(crate) lock_change: String,
    pub(crate) mark_published: String,
    pub(crate) due: String,
    pub(crate) policies: String,
    pub(crate) delete_policy: String,
    pub(crate) insert_policy: String,
}

impl ChangeQueries {
    pub(crate) fn new<D: Dialect>() -> Self {
        let q = |s: String| spell::<D>(&s);
        // The namespace set is one text `,ns1,ns2,` (namespace ids hold no comma).
        let in_set = D::contains("?", &D::concat(&D::concat("','", "tenant_id"), "','"));
        let filter = format!(
            "(? = 0 OR tenant_id = ?) AND (? = '' OR state = ?) AND (? = '' OR author = ?) \
             AND (? = '' OR {in_set})"
        );
        ChangeQueries {
            insert_change: q(format!(
                "INSERT INTO nacelle_change (tenant_id, title, description, author, state, \
                 stale, version, created_ms, updated_ms, publish_at_ms) \
                 VALUES (?, ?, ?, ?, ?, 0, 1, ?, ?, 0){}",
                D::RETURNING_ID
            )),
            insert_item: q(
                "INSERT INTO nacelle_change_item (change_id, ord, group_id, data_id, \
                 op, content, config_type, base_md5) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                    .into(),
            ),
            insert_event: q(
                "INSERT INTO nacelle_change_event (change_id, kind, username, \
                 time_ms, text) VALUES (?, ?, ?, ?, ?)"
                    .into(),
            ),
            get_change: q(format!(
                "SELECT {CHANGE_COLUMNS} FROM nacelle_change WHERE id = ?"
            )),
            items_of: q(
                "SELECT group_id, data_id, op, content, config_type, base_md5 \
                 FROM nacelle_change_item WHERE change_id = ? ORDER BY ord"
                    .into(),
            ),
            events_of: q(
                "SELECT kind, username, time_ms, text FROM nacelle_change_event \
                 WHERE change_id = ? ORDER BY id"
                    .into(),
            ),
            count: q(format!(
                "SELECT COUNT(*) AS n FROM nacelle_change WHERE {filter}"
            )),
            list: q(format!(
                "SELECT {CHANGE_COLUMNS}, (SELECT COUNT(*) FROM nacelle_change_item i \
                 WHERE i.change_id = c.id) AS item_count FROM nacelle_change c \
                 WHERE {filter} ORDER BY id DESC LIMIT ? OFFSET ?"
            )),
            bump: q(
                "UPDATE nacelle_change SET version = version + 1, updated_ms = ? \
                 WHERE id = ? AND version = ?"
                    .into(),
            ),
            set_fields: q(
                "UPDATE nacelle_change SET title = ?, description = ?, state = ?, \
                 stale = ?, publish_at_ms = ? WHERE id = ?"
                    .into(),
            ),
            delete_items: q("DELETE FROM nacelle_change_item WHERE change_id = ?".into()),
            lock_change: q(format!(
                "SELECT version, state FROM nacelle_change WHERE id = ?{}",
                D::FOR_UPDATE
            )),
            mark_published: q(format!(
                "UPDATE nacelle_change SET state = '{}', stale = 0, publish_at_ms = 0, \
                 version = version + 1, updated_ms = ? WHERE id = ?",
                nacelle_core::change::ChangeState::Published.as_str()
            )),
            due: q(format!(
                "SELECT id, version FROM nacelle_change WHERE state = '{}' \
                 AND publish_at_ms > 0 AND publish_at_ms <= ? ORDER BY publish_at_ms, id",
                nacelle_core::change::ChangeState::Approved.as_str()
            )),
            policies: "SELECT tenant_id, group_pattern, required_approvals, updated_by, \
                 updated_ms FROM nacelle_review_policy ORDER BY tenant_id, group_pattern"
                .into(),
            delete_policy: q(
                "DELETE FROM nacelle_review_policy WHERE tenant_id = ? AND group_pattern = ?"
                    .into(),
            ),
            insert_policy: q(
                "INSERT INTO nacelle_review_policy (tenant_id, group_pattern, \
                 required_approvals, updated_by, updated_ms) VALUES (?, ?, ?, ?, ?)"
                    .into(),
            ),
        }
    }
}

fn item_args<'a>(id: ChangeId, ord: usize, item: &'a ChangeItem) -> [Arg<'a>; 8] {
    let (content, ty) = match &item.op {
        ChangeOp::Publish {
            content,
            config_type,
        } => (content.as_str(), config_type.as_str()),
        ChangeOp::Remove => ("", ""),
    };
    [
        Arg::Int(id),
        Arg::Int(ord as i64),
        Arg::Text(&item.group),
        Arg::Text(&item.data_id),
        Arg::Text(item.op.as_str()),
        Arg::Text(content),
        Arg::Text(ty),
        Arg::Text(&item.base_md5),
    ]
}

fn event_args<'a>(id: ChangeId, e: &'a NewChangeEvent, now_ms: i64) -> [Arg<'a>; 5] {
    [
        Arg::Int(id),
        Arg::Text(e.kind.as_str()),
        Arg::Text(&e.user),
        Arg::Int(now_ms),
        Arg::Text(&e.text),
    ]
}

fn bad_row(what: &str, value: &str) -> StoreError {
    StoreError::Unavailable(format!("unreadable change request row: {what} `{value}`"))
}

fn change_of<DB: Exec>(row: &DB::Row) -> Result<ChangeRequest, StoreError> {
    let state = DB::text(row, "state")?;
    Ok(ChangeRequest {
        id: DB::int(row, "id")?,
        namespace: NamespaceId::from_trusted(&DB::text(row, "tenant_id")?),
        title: DB::text(row, "title")?,
        description: DB::text(row, "description")?,
        author: DB::text(row, "author")?,
        state: ChangeState::parse(&state).ok_or_else(|| bad_row("state", &state))?,
        stale: DB::int(row, "stale")? != 0,
        version: DB::int(row, "version")?,
        created_ms: DB::int(row, "created_ms")?,
        updated_ms: DB::int(row, "updated_ms")?,
        publish_at_ms: Some(DB::int(row, "publish_at_ms")?).filter(|&t| t > 0),
        items: Vec::new(),
        events: Vec::new(),
        item_count: 0,
    })
}

/// Creates a change request with its items and `created` event, in one transaction.
pub(crate) async fn create<DB: Exec>(
    pool: &Pool<DB>,
    q: &ChangeQueries,
    change: &NewChange,
) -> Result<ChangeId, StoreError> {
    sql::in_transaction(pool, async |conn| {
        let args = [
            Arg::Text(change.namespace.as_str()),
            Arg::Text(&change.title),
            Arg::Text(&change.description),
            Arg::Text(&change.author),
            Arg::Text(change.state.as_str()),
            Arg::Int(change.now_ms),
            Arg::Int(change.now_ms),
        ];
        let id =
            sql::insert_returning_id::<DB>(conn, &q.insert_change, &args, "change request").await?;
        for (ord, item) in change.items.iter().enumerate() {
            DB::run(conn, &q.insert_item, &item_args(id, ord, item))
                .await
                .map_err(map_err)?;
        }
        let created = NewChangeEvent {
            kind: ChangeEventKind::Created,
            user: change.author.clone(),
            text: String::new(),
        };
        DB::run(
            conn,
            &q.insert_event,
            &event_args(id, &created, change.now_ms),
        )
        .await
        .map_err(map_err)?;
        Ok(id)
    })
    .await
}

/// One change request with its items and events.
pub(crate) async fn get<DB: Exec>(
    pool: &Pool<DB>,
    q: &ChangeQueries,
    id: ChangeId,
) -> Result<Option<ChangeRequest>, StoreError> {
    let mut conn = pool.acquire().await.map_err(map_err)?;
    let Some(row) = DB::row(&mut conn, &q.get_change, &[Arg::Int(id)])
        .await
        .map_err(map_err)?
    else {
        return Ok(None);
    };
    let mut change = change_of::<DB>(&row)?;
    for row in DB::rows(&mut conn, &q.items_of, &[Arg::Int(id)])
        .await
        .map_err(map_err)?
    {
        let op = DB::text(&row, "op")?;
        change.items.push(ChangeItem {
            group: DB::text(&row, "group_id")?,
            data_id: DB::text(&row, "data_id")?,
            op: match op.as_str() {
                "publish" => ChangeOp::Publish {
                    content: DB::text(&row, "content")?,
                    config_type: ConfigType::parse_lenient(&DB::text(&row, "config_type")?),
                },
                "remove" => ChangeOp::Remove,
                _ => return Err(bad_row("op", &op)),
            },
            base_md5: DB::text(&row, "base_md5")?,
        });
    }
    for row in DB::rows(&mut conn, &q.events_of, &[Arg::Int(id)])
        .await
        .map_err(map_err)?
    {
        let kind = DB::text(&row, "kind")?;
        change.events.push(ChangeEvent {
            kind: ChangeEventKind::parse(&kind).ok_or_else(|| bad_row("event", &kind))?,
            user: DB::text(&row, "username")?,
            time_ms: DB::int(&row, "time_ms")?,
            text: DB::text(&row, "text")?,
        });
    }
    change.item_count = change.items.len();
    Ok(Some(change))
}

/// Change requests matching `filter`, newest first.
pub(crate) async fn list<DB: Exec>(
    pool: &Pool<DB>,
    q: &ChangeQueries,
    filter: &ChangeFilter,
    page: PageRequest,
) -> Result<Page<ChangeRequest>, StoreError> {
    let ns = filter.namespace.as_ref().map_or("", |n| n.as_str());
    let state = filter.state.map_or("", ChangeState::as_str);
    let author = filter.author.as_deref().unwrap_or("");
    // `,ns1,ns2,` (the default namespace is the empty id: `,,`); `""` is no restriction,
    // so an empty set never reaches here (the service answers it without a query).
    let set = filter.namespaces.as_ref().map_or(String::new(), |all| {
        let mut s = String::from(",");
        for n in all {
            s.push_str(n.as_str());
            s.push(',');
        }
        s
    });
    let args = [
        Arg::Int(i64::from(filter.namespace.is_some())),
        Arg::Text(ns),
        Arg::Text(state),
        Arg::Text(state),
        Arg::Text(author),
        Arg::Text(author),
        Arg::Text(&set),
        Arg::Text(&set),
    ];
    let page = PageRequest {
        page_no: page.page_no,
        page_size: page.page_size.max(1),
    };
    sql::read_page(pool, (&q.count, &q.list), &args, page, |row| {
        let mut change = change_of::<DB>(row)?;
        change.item_count = usize::try_from(DB::int(row, "item_count")?).unwrap_or(0);
        Ok(change)
    })
    .await
}

/// Applies `update` if the request is still at its expected version: the new version.
pub(crate) async fn update<DB: Exec>(
    pool: &Pool<DB>,
    q: &ChangeQueries,
    id: ChangeId,
    update: &ChangeUpdate,
) -> Result<i64, StoreError> {
    sql::in_transaction(pool, async |conn| {
        // Write first: the version check takes the row's write lock (and SQLite's database
        // lock) before anything is read, so no reader's snapshot has to be upgraded.
        let bumped = DB::run(
            conn,
            &q.bump,
            &[
                Arg::Int(update.now_ms),
                Arg::Int(id),
                Arg::Int(update.expected_version),
            ],
        )
        .await
        .map_err(map_err)?;
        let current = DB::row(conn, &q.get_change, &[Arg::Int(id)])
            .await
            .map_err(map_err)?;
        let Some(row) = current else {
            return Err(StoreError::NotFound(format!("change request {id}")));
        };
        if DB::rows_affected(&bumped) == 0 {
            return Err(StoreError::CasMismatch);
        }
        let current = change_of::<DB>(&row)?;
        let title = update.title.as_deref().unwrap_or(&current.title);
        let description = update
            .description
            .as_deref()
            .unwrap_or(&current.description);
        let state = update.state.unwrap_or(current.state);
        let stale = update.stale.unwrap_or(current.stale);
        let publish_at = update.publish_at_ms.unwrap_or(current.publish_at_ms);
        DB::run(
            conn,
            &q.set_fields,
            &[
                Arg::Text(title),
                Arg::Text(description),
                Arg::Text(state.as_str()),
                Arg::Int(i64::from(stale)),
                Arg::Int(publish_at.unwrap_or(0)),
                Arg::Int(id),
            ],
        )
        .await
        .map_err(map_err)?;
        if let Some(items) = &update.items {
            DB::run(conn, &q.delete_items, &[Arg::Int(id)])
                .await
                .map_err(map_err)?;
            for (ord, item) in items.iter().enumerate() {
                DB::run(conn, &q.insert_item, &item_args(id, ord, item))
                    .await
                    .map_err(map_err)?;
            }
        }
        DB::run(
            conn,
            &q.insert_event,
            &event_args(id, &update.event, update.now_ms),
        )
        .await
        .map_err(map_err)?;
        Ok(current.version)
    })
    .await
}

/// Approved requests due at `now_ms`, with their versions.
pub(crate) async fn due<DB: Exec>(
    pool: &Pool<DB>,
    q: &ChangeQueries,
    now_ms: i64,
) -> Result<Vec<(ChangeId, i64)>, StoreError> {
    let mut conn = pool.acquire().await.map_err(map_err)?;
    DB::rows(&mut conn, &q.due, &[Arg::Int(now_ms)])
        .await
        .map_err(map_err)?
        .iter()
        .map(|row| Ok((DB::int(row, "id")?, DB::int(row, "version")?)))
        .collect()
}

/// Every review policy.
pub(crate) async fn policies<DB: Exec>(
    pool: &Pool<DB>,
    q: &ChangeQueries,
) -> Result<Vec<ReviewPolicy>, StoreError> {
    let mut conn = pool.acquire().await.map_err(map_err)?;
    DB::rows(&mut conn, &q.policies, &[])
        .await
        .map_err(map_err)?
        .iter()
        .map(|row| {
            Ok(ReviewPolicy {
                namespace: NamespaceId::from_trusted(&DB::text(row, "tenant_id")?),
                group_pattern: DB::text(row, "group_pattern")?,
                required_approvals: u32::try_from(DB::int(row, "required_approvals")?).unwrap_or(0),
                updated_by: DB::text(row, "updated_by")?,
                updated_ms: DB::int(row, "updated_ms")?,
            })
        })
        .collect()
}

/// Creates or replaces a policy (one transaction).
pub(crate) async fn set_policy<DB: Exec>(
    pool: &Pool<DB>,
    q: &ChangeQueries,
    p: &ReviewPolicy,
) -> Result<(), StoreError> {
    sql::in_transaction(pool, async |conn| {
        let key = [Arg::Text(p.namespace.as_str()), Arg::Text(&p.group_pattern)];
        DB::run(conn, &q.delete_policy, &key)
            .await
            .map_err(map_err)?;
        let args = [
            key[0],
            key[1],
            Arg::Int(i64::from(p.required_approvals)),
            Arg::Text(&p.updated_by),
            Arg::Int(p.updated_ms),
        ];
        DB::run(conn, &q.insert_policy, &args)
            .await
            .map_err(map_err)?;
        Ok(())
    })
    .await
}

/// Deletes a policy; whether it existed.
pub(crate) async fn delete_policy<DB: Exec>(
    pool: &Pool<DB>,
    q: &ChangeQueries,
    namespace: &NamespaceId,
    group_pattern: &str,
) -> Result<bool, StoreError> {
    let mut conn = pool.acquire().await.map_err(map_err)?;
    let args = [Arg::Text(namespace.as_str()), Arg::Text(group_pattern)];
    let done = DB::run(&mut conn, &q.delete_policy, &args)
        .await
        .map_err(map_err)?;
    Ok(DB::rows_affected(&done) > 0)
}

/// A fixed statement (every parameter a value) run on the executor's connection.
async fn run_fixed<C: WriteConn>(c: &mut C, sql: &str, args: &[Arg<'_>]) -> Result<(), C::Error> {
    let st = Statement {
        sql,
        params: args.iter().copied().map(Param::Value).collect(),
        returns: Returns::Nothing,
    };
    c.run(&st, args).await?;
    Ok(())
}

/// The publish of a change request: its statements, request id, expected version,
/// writes, event, time.
pub(crate) struct PublishChange {
    /// The change requests' statements (the step may run on SQLite's writer thread).
    pub sql: Arc<ChangeQueries>,
    pub id: ChangeId,
    pub version: i64,
    pub writes: Vec<ChangeWrite>,
    pub event: NewChangeEvent,
    pub now_ms: i64,
}

#[async_trait]
impl Step for PublishChange {
    type Out = ChangePublishOutcome;

    /// Every check comes before the first write (the request's state and version under
    /// its lock, then every key's md5 under its lock, in key order), so a `Moved` or
    /// `Stale` outcome wrote nothing, in a transaction of its own or in SQLite's group.
    async fn run<C: WriteConn>(
        &self,
        c: &mut C,
        q: &Queries,
    ) -> Result<ChangePublishOutcome, C::Error> {
        let qs = &*self.sql;
        let Some((version, state)) = c.lock_change(&qs.lock_change, &[Arg::Int(self.id)]).await?
        else {
            return Err(StoreError::NotFound(format!("change request {}", self.id)).into());
        };
        if version != self.version || state != ChangeState::Approved.as_str() {
            return Ok(ChangePublishOutcome::Moved);
        }
        let mut order: Vec<usize> = (0..self.writes.len()).collect();
        order.sort_by(|&a, &b| self.writes[a].key().cmp(self.writes[b].key()));
        if order
            .windows(2)
            .any(|w| self.writes[w[0]].key() == self.writes[w[1]].key())
        {
            return Err(StoreError::Rejected("a change request names a key twice".into()).into());
        }
        let mut currents = vec![None; self.writes.len()];
        let mut stale = Vec::new();
        for &i in &order {
            let w = &self.writes[i];
            if let ChangeWrite::Publish { record, .. } = w {
                if record.cas_md5.is_some() || record.gray.is_some() {
                    let msg = "a change request publishes formal configs without cas_md5";
                    return Err(StoreError::Rejected(msg.into()).into());
                }
            }
            let current = write::lock_current(c, q, w.key()).await?;
            if current.as_ref().map_or("", |cur| cur.md5.as_str()) != w.base_md5() {
                stale.push(w.key().clone());
            }
            currents[i] = current;
        }
        if !stale.is_empty() {
            return Ok(ChangePublishOutcome::Stale(stale));
        }
        // Every plan is made before the first statement runs: a refused value fails the
        // publish before anything is written.
        let mut plans = Vec::with_capacity(order.len());
        for &i in &order {
            let plan = match &self.writes[i] {
                ChangeWrite::Publish { record, .. } => {
                    let now = write::stored_ms::<C>(record.now_ms);
                    Some(plan_publish(record, currents[i].as_ref(), now)?)
                }
                ChangeWrite::Remove { key, source, .. } => {
                    let now = write::stored_ms::<C>(self.now_ms);
                    plan_remove(key, source, currents[i].as_ref(), now)
                }
            };
            plans.push((i, plan));
        }
        let mut written = vec![ChangeWritten::Removed(None); self.writes.len()];
        for (i, plan) in &plans {
            let Some(plan) = plan else { continue };
            let (id, revision) = write::execute(c, q, plan).await?;
            written[*i] = match &self.writes[*i] {
                ChangeWrite::Publish { .. } => {
                    ChangeWritten::Published(Box::new(write::stored(plan, id, revision)?))
                }
                ChangeWrite::Remove { .. } => ChangeWritten::Removed(Some(revision)),
            };
        }
        run_fixed(
            c,
            &qs.mark_published,
            &[Arg::Int(self.now_ms), Arg::Int(self.id)],
        )
        .await?;
        let event = event_args(self.id, &self.event, self.now_ms);
        run_fixed(c, &qs.insert_event, &event).await?;
        Ok(ChangePublishOutcome::Published(written))
    }

    fn wrote_part(err: &StoreError) -> bool {
        !matches!(err, StoreError::NotFound(_) | StoreError::Rejected(_))
    }
}
