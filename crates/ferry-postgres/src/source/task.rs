//! The PostgresSource task: resumes each table from one offsets read and reads it round after round.
//!
//! A *round* reads one table (or the query) once, like Kafka Connect's JDBC `TableQuerier`: in a
//! read-only transaction it declares a cursor over the mode's `SELECT` (bounds fixed when the round
//! starts) and fetches `batch.max.rows` rows per poll until the cursor is exhausted; then the table
//! waits `poll.interval.ms` and the table due next gets a round. Rows are emitted in the cursor's
//! order and every record carries the offset right after its row.
//!
//! Cancel safety: the task's position only moves when a poll returns records. While a poll awaits the
//! database the connection's state is marked unknown; if that poll is dropped, the next poll rolls the
//! transaction back and starts the round again from the last returned row, so nothing is lost or
//! returned twice (in `bulk` mode the round restarts from the top).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_api::{
    ConnectError, ConnectMap, SourceOffset, SourcePartition, SourceRecord, SourceTask,
    SourceTaskContext, async_trait,
};
use tokio_postgres::Row;
use tokio_postgres::types::{ToSql, Type};

use super::columns;
use super::config::{Mode, Source, SourceConfig, TIMESTAMP_INITIAL_CURRENT, TableId};
use super::conn::{Db, connect, give_up};
use super::decode::{RowShape, ValueMapping, incrementing_value, raw, timestamp_value};
use super::discovery::{Selection, auto_increment_column};
use super::guard::{Guard, IncLimit};
use super::offset::{
    Cursor, OffsetError, QueryPartition, TablePartition, decode_offset, lookup_partitions,
};
use super::sql::{self, SourceItem};
use super::time::Micros;
use super::url::ConnectionSpec;
use super::zone::ZoneShifts;
use ferry_api::config::invalid_config;

/// The longest an idle poll waits before returning an empty batch.
const IDLE_WAIT: Duration = Duration::from_millis(500);

/// Reads a share of a PostgresSource connector's tables (or its query).
pub struct PostgresSourceTask {
    running: Option<Running>,
}

impl PostgresSourceTask {
    /// A task; it connects when started.
    pub fn new() -> Self {
        Self { running: None }
    }
}

impl Default for PostgresSourceTask {
    fn default() -> Self {
        Self::new()
    }
}

/// The state of the connection's transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// No transaction.
    Idle,
    /// A round's cursor is open; `exhausted`: its last fetch returned fewer rows than asked.
    Open { exhausted: bool },
    /// A database call was interrupted (its poll was dropped): roll back before anything else.
    Unknown,
}

/// One table (or the query) and where it stands.
struct Querier {
    /// The table (none for a query).
    table: Option<TableId>,
    /// The incrementing column: configured, or the table's auto-increment column.
    incrementing_column: Option<String>,
    /// `table public.orders` or `query`, for messages.
    name: String,
    /// The struct schema's name: the table's name (none for a query).
    struct_name: Option<String>,
    partition: SourcePartition,
    topic: String,
    /// The mode's SELECT with its parameters.
    select: String,
    /// Incrementing mode with the late-commit guard: the highest key visible now.
    max_select: Option<String>,
    /// Incrementing mode: the highest key safe to read (late-commit guard).
    inc_limit: IncLimit,
    /// Where the next round starts: after the last row returned.
    cursor: Cursor,
    /// When the next round may start.
    next_due: Instant,
    shape: Option<RowShape>,
}

struct Running {
    /// The catalog criteria of the tables read (none for a query), and when to look again.
    selection: Option<Selection>,
    next_discovery: Instant,
    context: Arc<dyn SourceTaskContext>,
    /// The task's configuration, for queriers of tables found later.
    config: SourceConfig,
    mapping: ValueMapping,
    mode: Mode,
    batch: usize,
    poll_interval: Duration,
    delay: Duration,
    timestamp_columns: Vec<String>,
    /// `db.timezone`: the zone of `timestamp without time zone` values.
    zone: String,
    /// The late-commit guard (`None`: off, `ferry.late.commit.max.wait.ms=0`).
    guard: Option<Guard>,
    db: Db,
    queriers: Vec<Querier>,
    /// The querier whose round is open.
    active: Option<usize>,
    phase: Phase,
    /// Where to reconnect after a transient failure.
    connection: ConnectionSpec,
    /// `connection.attempts` and `connection.backoff.ms`.
    attempts: u32,
    backoff: Duration,
    /// Transient failures in a row (reset by a poll that worked), and the first one's message.
    failures: u32,
    first_failure: Option<String>,
    /// After a transient failure: when to reconnect.
    retry_at: Option<Instant>,
}

#[async_trait]
impl SourceTask for PostgresSourceTask {
    /// Its offsets are all it needs from a delivered record: no `commit_record`.
    fn wants_delivered_records(&self) -> bool {
        false
    }

    /// Connects and prepares; a transient failure (the database unreachable, restarting, …) is tried
    /// again `connection.attempts` times, `connection.backoff.ms` apart, as Kafka Connect does.
    async fn start(&mut self, context: Arc<dyn SourceTaskContext>) -> Result<(), ConnectError> {
        let config = SourceConfig::parse_task(context.configs())
            .map_err(|issues| invalid_config("PostgresSource", "task configuration", &issues))?;
        if !config.connection.ignored.is_empty() {
            tracing::warn!(
                "PostgresSource: connection.url parameters not supported by Ferry and ignored: {}",
                config.connection.ignored.join(", ")
            );
        }
        let attempts = config.safety.connection_attempts;
        let mut attempt = 1;
        loop {
            match open(&context, config.clone()).await {
                Ok(running) => {
                    self.running = Some(running);
                    return Ok(());
                }
                Err(e) if e.is_retriable() && attempt < attempts => {
                    tracing::warn!(
                        "PostgresSource: starting failed (attempt {attempt} of connection.attempts={attempts}), \
                         trying again in {} ms: {e}",
                        config.safety.connection_backoff.as_millis()
                    );
                    tokio::time::sleep(config.safety.connection_backoff).await;
                    attempt += 1;
                }
                Err(e) if e.is_retriable() => return Err(give_up(&e, attempt)),
                Err(e) => return Err(e),
            }
        }
    }

    async fn poll(&mut self) -> Result<Vec<SourceRecord>, ConnectError> {
        let Some(running) = self.running.as_mut() else {
            return Err(ConnectError::fatal(
                "PostgresSource: poll() called before start() or after stop()",
            ));
        };
        running.poll().await
    }

    async fn stop(&mut self) -> Result<(), ConnectError> {
        // Closing the connection makes the server roll back an open round.
        if let Some(running) = self.running.take() {
            running.db.close().await;
        }
        Ok(())
    }
}

/// Connects, checks the configuration against the database, and reads the stored offsets.
async fn open(
    context: &Arc<dyn SourceTaskContext>,
    config: SourceConfig,
) -> Result<Running, ConnectError> {
    let db = connect(&config.connection).await?;
    columns::check_zone(&db, &config.safety.db_timezone).await?;
    let guard = match config.safety.late_commit_max_wait {
        Some(wait) if config.mode != Mode::Bulk => Some(Guard::new(wait, &db).await?),
        _ => None,
    };
    let selection = selection(&config);
    let mut config = config;
    if config.options.fold_identifiers {
        // quote.sql.identifiers=never: PostgreSQL folds unquoted names to lower case; quoting the
        // folded names reads the same columns.
        fold_columns(&mut config);
    }
    if let Some(selection) = &selection {
        let tables = selection.tables(&db).await?;
        report_missing(selection, &tables);
        config.source = Source::Tables(tables);
    }
    let queriers = new_queriers(context, &config, &db, guard.is_some()).await?;
    let next_discovery = Instant::now() + config.options.table_poll_interval;
    Ok(Running {
        selection,
        next_discovery,
        context: context.clone(),
        mapping: config.options.mapping,
        config: config.clone(),
        mode: config.mode,
        batch: config.batch_max_rows,
        poll_interval: config.poll_interval,
        delay: config.timestamp_delay,
        timestamp_columns: config.timestamp_columns,
        zone: config.safety.db_timezone,
        guard,
        db,
        queriers,
        active: None,
        phase: Phase::Idle,
        connection: config.connection,
        attempts: config.safety.connection_attempts,
        backoff: config.safety.connection_backoff,
        failures: 0,
        first_failure: None,
        retry_at: None,
    })
}

/// The configured column names as PostgreSQL reads them unquoted (ASCII lower case).
fn fold_columns(config: &mut SourceConfig) {
    if let Some(c) = config.incrementing_column.as_mut() {
        *c = c.to_ascii_lowercase();
    }
    for c in &mut config.timestamp_columns {
        *c = c.to_ascii_lowercase();
    }
}

/// The catalog criteria of a task reading tables (none for a query).
fn selection(config: &SourceConfig) -> Option<Selection> {
    let (whitelist, share) = match &config.source {
        Source::Query(_) => return None,
        Source::Tables(tables) => (Some(tables.clone()), (0, 1)),
        Source::Discover(share) => (None, *share),
    };
    Some(Selection {
        whitelist,
        blacklist: config.options.blacklist.clone(),
        types: config.options.table_types.clone(),
        schema_pattern: config.options.schema_pattern.clone(),
        share,
    })
}

/// Says which whitelisted tables are not read (yet), and when none is.
fn report_missing(selection: &Selection, found: &[TableId]) {
    if let Some(whitelist) = &selection.whitelist {
        let missing: Vec<String> = whitelist
            .iter()
            .filter(|t| !found.contains(t))
            .map(ToString::to_string)
            .collect();
        if !missing.is_empty() {
            tracing::warn!(
                "PostgresSource: whitelisted tables not found (of table.types {:?}, schema.pattern {:?}): {}; \
                 they are read once they exist (checked every table.poll.interval.ms)",
                selection.types,
                selection.schema_pattern,
                missing.join(", ")
            );
        }
    } else if found.is_empty() {
        tracing::info!(
            "PostgresSource: no table to read yet (table.types {:?}, schema.pattern {:?}, this task's share {}/{}); \
             looking again every table.poll.interval.ms",
            selection.types,
            selection.schema_pattern,
            selection.share.0,
            selection.share.1
        );
    }
}

/// The queriers of the items of `config.source`, each resumed from its stored offset (`guarded`:
/// the late-commit guard is on).
async fn new_queriers(
    context: &Arc<dyn SourceTaskContext>,
    config: &SourceConfig,
    db: &Db,
    guarded: bool,
) -> Result<Vec<Querier>, ConnectError> {
    let items = sql::items(&config.source);
    let stored = read_offsets(context, config).await?;
    let initial = initial_cursor(config, db).await?;
    let now = Instant::now();
    let mut queriers = Vec::with_capacity(items.len());
    for (item, stored) in items.iter().zip(stored) {
        let (name, struct_name, partition, topic) = item_identity(config, item)?;
        let cursor = resume_cursor(config, &name, stored, initial)?;
        let incrementing_column = incrementing_column_of(db, config, item, &name).await?;
        let table = match item {
            SourceItem::Table(t) => Some((*t).clone()),
            SourceItem::Query(_) => None,
        };
        let (select, max_select) = statements(
            db,
            config,
            item,
            &name,
            incrementing_column.as_deref(),
            guarded,
        )
        .await?;
        tracing::debug!("PostgresSource: {name} reads with: {select}");
        queriers.push(Querier {
            table,
            incrementing_column,
            name,
            struct_name,
            partition,
            topic,
            select,
            max_select,
            inc_limit: IncLimit::default(),
            cursor,
            next_due: now,
            shape: None,
        });
    }
    Ok(queriers)
}

/// An item's name for messages, its struct name, its offset partition and its topic.
fn item_identity(
    config: &SourceConfig,
    item: &SourceItem<'_>,
) -> Result<(String, Option<String>, ConnectMap, String), ConnectError> {
    Ok(match item {
        SourceItem::Table(t) => (
            format!("table {t}"),
            Some(t.table.clone()),
            ConnectMap::from_serde(&TablePartition::new(&t.schema, &t.table))?,
            format!("{}{}", config.topic_prefix, t.table),
        ),
        SourceItem::Query(_) => (
            "query".to_owned(),
            None,
            ConnectMap::from_serde(&QueryPartition::default())?,
            config.topic_prefix.clone(),
        ),
    })
}

/// Where the item `name` starts: after its stored offset, else at `initial`.
fn resume_cursor(
    config: &SourceConfig,
    name: &str,
    stored: Option<(SourcePartition, SourceOffset)>,
    initial: Cursor,
) -> Result<Cursor, ConnectError> {
    Ok(match stored {
        Some((found_under, offset)) => {
            let cursor = to_cursor(&offset).map_err(|m| {
                    ConnectError::fatal(format!(
                        "PostgresSource: the offset {offset} stored for {name} under partition {found_under} \
                         cannot be used: {m}; fix it with `ferry offsets set` or reset it"
                    ))
                })?;
            tracing::info!(
                "PostgresSource: {name} resumes after {offset} (stored under partition {found_under})"
            );
            cursor
        }
        None => {
            if config.mode != Mode::Bulk {
                tracing::info!(
                    "PostgresSource: {name} has no stored offset; it starts {}",
                    describe_start(config.mode, &initial)
                );
            }
            initial
        }
    })
}

/// The item's incrementing column: configured, or a table's auto-increment column when the mode
/// needs one and none is configured.
async fn incrementing_column_of(
    db: &Db,
    config: &SourceConfig,
    item: &SourceItem<'_>,
    name: &str,
) -> Result<Option<String>, ConnectError> {
    Ok(match (item, &config.incrementing_column) {
        (SourceItem::Table(t), None) if config.mode.uses_incrementing() => {
            let found = auto_increment_column(db, t).await?.ok_or_else(|| {
                ConnectError::fatal(format!(
                    "PostgresSource: {name} has no serial or identity column to use as the incrementing \
                     column; set incrementing.column.name"
                ))
            })?;
            tracing::info!(
                "PostgresSource: {name} uses its auto-increment column {found:?} (incrementing.column.name is empty)"
            );
            Some(found)
        }
        (_, configured) => configured.clone(),
    })
}

/// The item's SELECT (its timestamp columns checked) and, with the late-commit guard in
/// incrementing mode, the query of its largest incrementing value.
async fn statements(
    db: &Db,
    config: &SourceConfig,
    item: &SourceItem<'_>,
    name: &str,
    incrementing_column: Option<&str>,
    guarded: bool,
) -> Result<(String, Option<String>), ConnectError> {
    let folded;
    let item = match item {
        SourceItem::Table(t) if config.options.fold_identifiers => {
            folded = TableId {
                schema: t.schema.to_ascii_lowercase(),
                table: t.table.to_ascii_lowercase(),
            };
            &SourceItem::Table(&folded)
        }
        _ => item,
    };
    let checked;
    let item_config = if incrementing_column == config.incrementing_column.as_deref() {
        config
    } else {
        let mut c = config.clone();
        c.incrementing_column = incrementing_column.map(str::to_owned);
        checked = c;
        &checked
    };
    let ts_columns = columns::check(db, item, name, item_config).await?;
    let mut select = sql::select(
        config.mode,
        item,
        incrementing_column,
        &ts_columns,
        &config.safety.db_timezone,
    );
    if let Some(suffix) = &config.options.query_suffix {
        select = format!("{select} {suffix}");
    }
    let max_select = match (incrementing_column, config.mode, guarded) {
        (Some(inc), Mode::Incrementing, true) => Some(sql::max_incrementing(item, inc)),
        _ => None,
    };
    Ok((select, max_select))
}

/// One `offsets()` call for every partition of the task: a table's protocol-1 partition, then its
/// legacy one (the first stored wins); the query partition in query mode. Nothing in bulk mode.
/// Returns, per item, the stored offset and the partition it was found under.
async fn read_offsets(
    context: &Arc<dyn SourceTaskContext>,
    config: &SourceConfig,
) -> Result<Vec<Option<(SourcePartition, SourceOffset)>>, ConnectError> {
    let items = sql::items(&config.source).len();
    if config.mode == Mode::Bulk {
        return Ok(vec![None; items]);
    }
    let (partitions, per_item) = match &config.source {
        Source::Tables(tables) => (lookup_partitions(tables)?, 2),
        Source::Query(_) => (vec![ConnectMap::from_serde(&QueryPartition::default())?], 1),
        Source::Discover(_) => (Vec::new(), 2),
    };
    let reader = context.offset_storage_reader();
    let found = reader.offsets(&partitions).await.map_err(|e| {
        let retriable = matches!(
            e,
            ferry_api::OffsetReadError::Store {
                retriable: true,
                ..
            }
        );
        let message = format!(
            "PostgresSource: reading the committed offsets of {} partition(s) failed: {e}",
            partitions.len()
        );
        if retriable {
            ConnectError::retriable(message)
        } else {
            ConnectError::fatal(message)
        }
    })?;
    if found.len() != partitions.len() {
        return Err(ConnectError::fatal(format!(
            "PostgresSource: the offset reader answered {} entries for {} partitions",
            found.len(),
            partitions.len()
        )));
    }
    Ok(found
        .chunks(per_item)
        .map(|candidates| {
            candidates
                .iter()
                .find_map(|(p, o)| o.as_ref().map(|o| (p.clone(), o.clone())))
        })
        .collect())
}

/// The incrementing value of `row` in `column` (at `i`) of the querier `name`; a null is refused.
fn row_incrementing(
    row: &Row,
    column: &tokio_postgres::Column,
    i: usize,
    inc_column: Option<&str>,
    name: &str,
) -> Result<i64, ConnectError> {
    let fail = |m: String| ConnectError::fatal(format!("PostgresSource: {name}: {m}"));
    let bytes = raw(row, i)
        .map_err(|e| fail(e.to_string()))?
        .ok_or_else(|| {
            fail(format!(
                "a row has a null incrementing column {:?}",
                inc_column.unwrap_or_default()
            ))
        })?;
    incrementing_value(column.type_(), bytes)
        .map_err(|m| fail(format!("incrementing.column.name {:?}: {m}", column.name())))
}

/// A stored offset as a cursor (missing fields: the JDBC source's defaults).
fn to_cursor(offset: &SourceOffset) -> Result<Cursor, OffsetError> {
    let decoded = decode_offset(offset)?;
    let timestamp = match decoded.timestamp {
        Some(ms) => Some(Micros::from_offset(ms, decoded.timestamp_nanos)?),
        None => None,
    };
    Ok(Cursor {
        timestamp,
        incrementing: decoded.incrementing,
    })
}

/// The position of a table without stored offset: incrementing -1 (rows with a value above -1) and
/// `timestamp.initial` (-1: the database's current time; unset: the Unix epoch).
async fn initial_cursor(config: &SourceConfig, db: &Db) -> Result<Cursor, ConnectError> {
    let timestamp = match config.timestamp_initial {
        _ if !config.mode.uses_timestamp() => None,
        None => None,
        Some(TIMESTAMP_INITIAL_CURRENT) => Some(database_now(db).await?),
        Some(ms) => Some(Micros::from_millis(ms)),
    };
    Ok(Cursor {
        timestamp,
        incrementing: None,
    })
}

fn describe_start(mode: Mode, initial: &Cursor) -> String {
    match (mode.uses_timestamp(), initial.timestamp) {
        (true, Some(ts)) => format!("at timestamp.initial {}", ts.to_iso(true)),
        (true, None) => "from the beginning (timestamp.initial is not set)".to_owned(),
        (false, _) => "from the beginning (incrementing values above -1)".to_owned(),
    }
}

/// The database's current time (`now()`: the start of the current transaction, if any).
async fn database_now(db: &Db) -> Result<Micros, ConnectError> {
    let row = db
        .client
        .query_one("SELECT now()", &[])
        .await
        .map_err(|e| db.error("reading the database's current time", &e))?;
    let bytes = raw(&row, 0)
        .map_err(|m| ConnectError::fatal(format!("PostgresSource: now(): {m}")))?
        .ok_or_else(|| ConnectError::fatal("PostgresSource: now() returned null"))?;
    timestamp_value(&Type::TIMESTAMPTZ, bytes)
        .map_err(|m| ConnectError::fatal(format!("PostgresSource: now(): {m}")))
}

impl Running {
    /// One poll; a transient failure is retried on a new connection `connection.backoff.ms` later
    /// (empty polls meanwhile), at most `connection.attempts` times in a row. The round restarts
    /// after the last returned row, so nothing is lost or returned twice.
    async fn poll(&mut self) -> Result<Vec<SourceRecord>, ConnectError> {
        if let Some(at) = self.retry_at {
            let now = Instant::now();
            if at > now {
                tokio::time::sleep((at - now).min(IDLE_WAIT)).await;
                return Ok(Vec::new());
            }
            match connect(&self.connection).await {
                Ok(db) => {
                    let old = std::mem::replace(&mut self.db, db);
                    drop(old);
                    self.retry_at = None;
                    self.phase = Phase::Idle;
                    self.active = None;
                    tracing::info!("PostgresSource: reconnected to {}", self.db.describe);
                }
                Err(e) if e.is_retriable() => return self.transient(e),
                Err(e) => return Err(e),
            }
        }
        match self.poll_round().await {
            Ok(records) => {
                self.failures = 0;
                self.first_failure = None;
                Ok(records)
            }
            Err(e) if e.is_retriable() => self.transient(e),
            Err(e) => Err(e),
        }
    }

    /// Counts a transient failure: schedules a reconnection, or fails the task after
    /// `connection.attempts` in a row.
    fn transient(&mut self, e: ConnectError) -> Result<Vec<SourceRecord>, ConnectError> {
        self.failures += 1;
        let first = self
            .first_failure
            .get_or_insert_with(|| e.to_string())
            .clone();
        if self.failures >= self.attempts {
            let e = if first == e.to_string() {
                e
            } else {
                ConnectError::fatal(format!("{first}; then: {e}"))
            };
            return Err(give_up(&e, self.failures));
        }
        tracing::warn!(
            "PostgresSource: {e}; reconnecting in {} ms (attempt {} of connection.attempts={})",
            self.backoff.as_millis(),
            self.failures + 1,
            self.attempts
        );
        self.retry_at = Some(Instant::now() + self.backoff);
        self.phase = Phase::Idle;
        self.active = None;
        Ok(Vec::new())
    }

    async fn poll_round(&mut self) -> Result<Vec<SourceRecord>, ConnectError> {
        if self.phase == Phase::Unknown {
            // A poll was dropped while it waited for the database: start that round again.
            self.db
                .client
                .batch_execute("ROLLBACK")
                .await
                .map_err(|e| self.db.error("rolling back an interrupted read", &e))?;
            self.phase = Phase::Idle;
            self.active = None;
        }
        if let (Phase::Open { exhausted: true }, Some(active)) = (self.phase, self.active) {
            self.phase = Phase::Unknown;
            self.db
                .client
                .batch_execute("COMMIT")
                .await
                .map_err(|e| self.db.error("ending a read", &e))?;
            self.phase = Phase::Idle;
            self.active = None;
            self.queriers[active].next_due = Instant::now() + self.poll_interval;
        }
        if self.phase == Phase::Idle && Instant::now() >= self.next_discovery {
            self.rediscover().await?;
        }
        let index = match (self.phase, self.active) {
            (Phase::Open { .. }, Some(active)) => active,
            _ => {
                let Some((index, due)) = self
                    .queriers
                    .iter()
                    .enumerate()
                    .map(|(i, q)| (i, q.next_due))
                    .min_by_key(|(_, due)| *due)
                else {
                    tokio::time::sleep(IDLE_WAIT).await;
                    return Ok(Vec::new());
                };
                let now = Instant::now();
                if due > now {
                    tokio::time::sleep((due - now).min(IDLE_WAIT)).await;
                    return Ok(Vec::new());
                }
                self.phase = Phase::Unknown;
                if let Err(e) = self.begin_round(index).await {
                    return self.table_gone(index, e).await;
                }
                self.active = Some(index);
                self.phase = Phase::Open { exhausted: false };
                index
            }
        };
        self.phase = Phase::Unknown;
        let rows = {
            let db = &self.db;
            db.client
                .query_typed(&sql::fetch(self.batch), &[])
                .await
                .map_err(|e| db.error(&format!("reading {}", self.queriers[index].name), &e))?
        };
        let records = self.records(index, &rows).await?;
        self.phase = Phase::Open {
            exhausted: rows.len() < self.batch,
        };
        Ok(records)
    }

    /// A round of querier `index` failed to start with `error`: when its table was dropped since the
    /// last look, it is no longer read (as the JDBC source's table monitor would notice); otherwise
    /// the error stands.
    async fn table_gone(
        &mut self,
        index: usize,
        error: ConnectError,
    ) -> Result<Vec<SourceRecord>, ConnectError> {
        let Some(table) = self.queriers[index].table.clone() else {
            return Err(error);
        };
        if self.selection.is_none() || self.db.client.batch_execute("ROLLBACK").await.is_err() {
            return Err(error);
        }
        self.phase = Phase::Idle;
        self.active = None;
        self.rediscover().await?;
        if self
            .queriers
            .iter()
            .any(|q| q.table.as_ref() == Some(&table))
        {
            return Err(error);
        }
        Ok(Vec::new())
    }

    /// Looks for tables created or dropped since the last look (between rounds only, so no index
    /// into the queriers is held).
    async fn rediscover(&mut self) -> Result<(), ConnectError> {
        self.next_discovery = Instant::now() + self.config.options.table_poll_interval;
        let Some(selection) = &self.selection else {
            return Ok(());
        };
        let tables = selection.tables(&self.db).await?;
        // A whitelisted table that was being read and is gone now fails the task (issue 16: a
        // dropped table is a permanent error, said loudly); tables found by pattern just leave.
        if let Some(whitelist) = &selection.whitelist
            && let Some(gone) = self.queriers.iter().find(|q| {
                q.table
                    .as_ref()
                    .is_some_and(|t| whitelist.contains(t) && !tables.contains(t))
            })
        {
            return Err(ConnectError::fatal(format!(
                "PostgresSource: {} was dropped (or no longer matches table.types/schema.pattern) while it \
                 was being read; it is listed in table.whitelist, so the task stops here rather than skip it. \
                 Recreate the table, or remove it from table.whitelist, then restart the connector",
                gone.name
            )));
        }
        self.queriers.retain(|q| match &q.table {
            Some(t) if !tables.contains(t) => {
                // As the JDBC source's table monitor: a table that is gone is no longer read.
                tracing::warn!(
                    "PostgresSource: {} no longer exists (or no longer matches table.types/schema.pattern); \
                     it is not read until it is back",
                    q.name
                );
                false
            }
            _ => true,
        });
        let added: Vec<TableId> = tables
            .into_iter()
            .filter(|t| !self.queriers.iter().any(|q| q.table.as_ref() == Some(t)))
            .collect();
        if added.is_empty() {
            return Ok(());
        }
        tracing::info!(
            "PostgresSource: new tables to read: {}",
            added
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        );
        let mut config = self.config.clone();
        config.source = Source::Tables(added);
        let new = new_queriers(&self.context, &config, &self.db, self.guard.is_some()).await?;
        self.queriers.extend(new);
        Ok(())
    }

    /// Opens a round: the late-commit guard's reads (each in its own transaction), then a read-only
    /// transaction and the cursor over the mode's SELECT.
    async fn begin_round(&mut self, index: usize) -> Result<(), ConnectError> {
        let mut inc_limit = i64::MAX;
        let mut horizon = None;
        if let Some(guard) = self.guard.as_mut() {
            let db = &self.db;
            let querier = &mut self.queriers[index];
            // Before the horizon: `t` must precede `A` (see the guard's argument).
            let observed = match &querier.max_select {
                Some(max) => {
                    let row = db.client.query_one(max.as_str(), &[]).await.map_err(|e| {
                        db.error(&format!("reading the highest key of {}", querier.name), &e)
                    })?;
                    let v = row.try_get::<_, Option<i64>>(0).map_err(|e| {
                        ConnectError::fatal(format!("PostgresSource: {}: max(): {e}", querier.name))
                    })?;
                    let t = row.try_get::<_, std::time::SystemTime>(1).map_err(|e| {
                        ConnectError::fatal(format!(
                            "PostgresSource: {}: clock_timestamp(): {e}",
                            querier.name
                        ))
                    })?;
                    Some((Micros::from_system_time(t), v))
                }
                None => None,
            };
            let h = guard.horizon(db, &querier.name).await?;
            if let Some((t, v)) = observed {
                inc_limit = querier.inc_limit.update(t, v, &h).unwrap_or(i64::MIN);
            }
            horizon = Some(h);
        }
        let db = &self.db;
        let querier = &self.queriers[index];
        let name = &querier.name;
        db.client
            .batch_execute("BEGIN READ ONLY")
            .await
            .map_err(|e| db.error(&format!("starting a read of {name}"), &e))?;
        let end = if self.mode.uses_timestamp() {
            let now = database_now(db).await?;
            let delay = i64::try_from(self.delay.as_micros()).unwrap_or(i64::MAX);
            let end = Micros(now.0.saturating_sub(delay));
            Some(horizon.map_or(end, |h| end.min(h.bound)))
        } else {
            None
        };
        let declare = sql::declare(&querier.select);
        let statement = db
            .client
            .prepare(&declare)
            .await
            .map_err(|e| db.error(&format!("preparing the query of {name}"), &e))?;
        let cursor = querier.cursor;
        let begin = cursor
            .timestamp
            .unwrap_or(Micros::UNIX_EPOCH)
            .to_system_time();
        let end = end.unwrap_or(Micros::UNIX_EPOCH).to_system_time();
        let inc = cursor.incrementing.unwrap_or(-1);
        let params: Vec<&(dyn ToSql + Sync)> = match self.mode {
            Mode::Bulk => vec![],
            Mode::Incrementing => vec![&inc, &inc_limit],
            Mode::Timestamp => vec![&begin, &end],
            Mode::TimestampIncrementing => vec![&end, &begin, &inc],
        };
        db.client
            .execute(&statement, &params)
            .await
            .map_err(|e| db.error(&format!("querying {name}"), &e))?;
        tracing::debug!(
            "PostgresSource: {name}: round started at {:?}",
            querier.cursor
        );
        Ok(())
    }

    /// Turns fetched rows into records and moves the querier's cursor past them.
    async fn records(
        &mut self,
        index: usize,
        rows: &[Row],
    ) -> Result<Vec<SourceRecord>, ConnectError> {
        let Some(first) = rows.first() else {
            return Ok(Vec::new());
        };
        let columns = first.columns();
        self.ensure_shape(index, columns).await?;
        let inc_column = self.queriers[index].incrementing_column.clone();
        let inc_index = self.column_index(columns, inc_column.as_deref(), index)?;
        let ts_indexes = self
            .timestamp_columns
            .iter()
            .map(|c| {
                self.column_index(columns, Some(c), index)
                    .map(Option::unwrap_or_default)
            })
            .collect::<Result<Vec<usize>, _>>()?;
        let mode = self.mode;
        let row_ts = if mode.uses_timestamp() {
            columns::row_timestamps(
                &self.db,
                &self.zone,
                &self.queriers[index].name,
                columns,
                &ts_indexes,
                rows,
            )
            .await?
        } else {
            Vec::new()
        };
        let shifts = self.zone_shifts(index, rows).await?;
        let querier = &mut self.queriers[index];
        let Some(shape) = querier.shape.as_ref() else {
            return Ok(Vec::new());
        };
        let mut cursor = querier.cursor;
        let mut out = Vec::with_capacity(rows.len());
        for (n, row) in rows.iter().enumerate() {
            let value = shape.value(row, &shifts).map_err(|e| {
                ConnectError::fatal(format!("PostgresSource: {}: {e}", querier.name))
            })?;
            if let Some(i) = inc_index {
                cursor.incrementing = Some(row_incrementing(
                    row,
                    &columns[i],
                    i,
                    inc_column.as_deref(),
                    &querier.name,
                )?);
            }
            if let Some(ts) = row_ts.get(n) {
                cursor.timestamp = Some(*ts);
            }
            let offset = match mode {
                Mode::Bulk => None,
                _ => Some(ConnectMap::from_serde(&cursor.to_offset())?),
            };
            let mut record = SourceRecord::from_maps(
                Some(querier.partition.clone()),
                offset,
                querier.topic.clone(),
                Some(value),
            );
            record.value_schema = shape.schema.clone();
            out.push(record);
        }
        querier.cursor = cursor;
        Ok(out)
    }

    /// Builds the querier's row shape when it has none or `columns` do not fit it, saying which
    /// columns are left out and when the records have no value schema.
    async fn ensure_shape(
        &mut self,
        index: usize,
        columns: &[tokio_postgres::Column],
    ) -> Result<(), ConnectError> {
        if !self.queriers[index]
            .shape
            .as_ref()
            .is_some_and(|s| s.fits(columns))
        {
            let not_null = self.not_null(columns).await?;
            let querier = &mut self.queriers[index];
            let shape = RowShape::new(
                columns,
                &not_null,
                querier.struct_name.as_deref(),
                self.mapping,
            )
            .map_err(|m| ConnectError::fatal(format!("PostgresSource: {}: {m}", querier.name)))?;
            if !shape.skipped.is_empty() {
                let list: Vec<String> = shape
                    .skipped
                    .iter()
                    .map(|(n, t)| format!("{n} ({t})"))
                    .collect();
                tracing::warn!(
                    "PostgresSource: {}: columns of unsupported types are left out of the records: {}; cast them \
                     (e.g. to text) in a query to keep them",
                    querier.name,
                    list.join(", ")
                );
            }
            if shape.schema.is_none() {
                tracing::info!(
                    "PostgresSource: {}: json/jsonb columns are written as JSON, which no Kafka Connect schema \
                     describes; its records have no value schema",
                    querier.name
                );
            }
            querier.shape = Some(shape);
        }
        Ok(())
    }

    /// The zone shifts of the rows' local timestamps (none in UTC or without a shape).
    async fn zone_shifts(&self, index: usize, rows: &[Row]) -> Result<ZoneShifts, ConnectError> {
        Ok(match self.queriers[index].shape.as_ref() {
            Some(shape) if !ZoneShifts::is_utc(&self.zone) => {
                let name = &self.queriers[index].name;
                let keys = shape
                    .zone_keys(rows)
                    .map_err(|m| ConnectError::fatal(format!("PostgresSource: {name}: {m}")))?;
                ZoneShifts::lookup(&self.db, &self.zone, name, keys).await?
            }
            _ => ZoneShifts::utc(),
        })
    }

    /// The index of the cursor column `name` in the result (`None` when no name is given).
    fn column_index(
        &self,
        columns: &[tokio_postgres::Column],
        name: Option<&str>,
        index: usize,
    ) -> Result<Option<usize>, ConnectError> {
        let Some(name) = name else { return Ok(None) };
        columns
            .iter()
            .position(|c| c.name() == name)
            .map(Some)
            .ok_or_else(|| {
                ConnectError::fatal(format!(
                    "PostgresSource: {}: the column {name:?} is not in the result (columns: {})",
                    self.queriers[index].name,
                    columns
                        .iter()
                        .map(|c| c.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })
    }

    /// Which result columns come from `NOT NULL` table columns: by (table oid, column number).
    async fn not_null(
        &self,
        columns: &[tokio_postgres::Column],
    ) -> Result<HashMap<(u32, i16), bool>, ConnectError> {
        let mut tables: Vec<u32> = columns.iter().filter_map(|c| c.table_oid()).collect();
        tables.sort_unstable();
        tables.dedup();
        if tables.is_empty() {
            return Ok(HashMap::new());
        }
        let rows = self
            .db
            .client
            .query(
                "SELECT attrelid, attnum, attnotnull FROM pg_catalog.pg_attribute WHERE attrelid = ANY($1) \
                 AND attnum > 0",
                &[&tables],
            )
            .await
            .map_err(|e| self.db.error("reading which columns are NOT NULL", &e))?;
        let mut out = HashMap::with_capacity(rows.len());
        for row in rows {
            let (Ok(table), Ok(column), Ok(not_null)) = (
                row.try_get::<_, u32>(0),
                row.try_get::<_, i16>(1),
                row.try_get::<_, bool>(2),
            ) else {
                continue;
            };
            out.insert((table, column), not_null);
        }
        Ok(out)
    }
}
