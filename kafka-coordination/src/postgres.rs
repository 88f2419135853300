//! The database fence (feature `postgres`): a deposed leader's writes to PostgreSQL are refused
//! inside the writer's own transaction, as the broker refuses its writes to Kafka.
//!
//! A [`Fence`] is a table with one row per role: the highest term that has written. In each
//! transaction that must come from the current leader, call [`Fence::advance`] with the
//! [`Claim`] of the term (its role, term and pair). It moves the role's row up to that term, or
//! fails with [`FenceError::Fenced`] when a newer term has already written; the caller then
//! rolls back, and none of the transaction's statements are committed. The row stays locked
//! until the transaction ends, so a newer term's first write waits for an older writer's open
//! transaction and comes after it.
//!
//! ```no_run
//! # fn run(leadership: &kafka_coordination::leadership::Leadership, db: &mut postgres::Client)
//! #     -> Result<(), Box<dyn std::error::Error>> {
//! use kafka_coordination::postgres::{Claim, Fence};
//!
//! let fence = Fence::new("coordination_fence")?;
//! fence.migrate(db)?; // CREATE TABLE IF NOT EXISTS, once at start-up
//! let mut tx = db.transaction()?;
//! fence.advance(&mut tx, &Claim::of(leadership))?; // Err(Fenced): `tx` rolls back on drop
//! tx.execute("INSERT INTO job_runs (job, term) VALUES ($1, $2)", &[&"nightly", &leadership.term()])?;
//! tx.commit()?;
//! # Ok(()) }
//! ```
//!
//! The term, never the pair, orders writers: terms only grow per role, producer ids do not.
//! The check is the store's own, so it also holds for a leader paused past its lease that wakes
//! up and writes before it notices it lost the role. The SQL, for other languages and other
//! stores, is in the guide (`docs/guide/fencing-stores.md`).

use std::fmt;

use kafka_coordination_core::FencingToken;

use crate::error::{Error, TransportError};
use crate::leadership::Leadership;

/// The table name [`Fence::default`] uses.
pub const DEFAULT_TABLE: &str = "coordination_fence";

/// A term's right to write: what [`Fence::advance`] checks and records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claim {
    role: String,
    member: String,
    term: i64,
    token: FencingToken,
}

impl Claim {
    /// The claim of a running term: its role, member, term and pair.
    pub fn of(leadership: &Leadership) -> Claim {
        Claim {
            role: leadership.role().as_str().to_owned(),
            member: leadership.member().as_str().to_owned(),
            term: leadership.term(),
            token: leadership.token(),
        }
    }

    /// A claim from its parts, for a writer that got them from a leader (say in a request).
    /// `term` is [`Leadership::term`]; the pair is recorded, never compared.
    pub fn new(
        role: impl Into<String>,
        member: impl Into<String>,
        term: i64,
        token: FencingToken,
    ) -> Claim {
        Claim {
            role: role.into(),
            member: member.into(),
            term,
            token,
        }
    }

    /// The role.
    pub fn role(&self) -> &str {
        &self.role
    }

    /// The member that leads the term.
    pub fn member(&self) -> &str {
        &self.member
    }

    /// The term number.
    pub fn term(&self) -> i64 {
        self.term
    }

    /// The term's pair.
    pub fn token(&self) -> FencingToken {
        self.token
    }
}

/// What the fence row of a role holds: the newest term that wrote through the fence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FenceRow {
    /// The role.
    pub role: String,
    /// The newest term that wrote.
    pub term: i64,
    /// Its pair (recorded for people reading the table; never compared).
    pub token: FencingToken,
    /// Its member.
    pub member: String,
}

/// Why a write through the fence failed. `Display` says what happened and what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FenceError {
    /// A newer term of the role already wrote: this writer is a deposed leader. The caller's
    /// transaction must not commit (dropping it rolls it back). Converts into the library's
    /// [`Error::Fenced`] with the writer's pair.
    #[error(
        "fenced: term {term} ({token}) of role `{role}` was superseded: term {newer_term} \
         (member `{newer_member}`) already wrote to `{table}`; roll this transaction back and stop the role's work"
    )]
    Fenced {
        /// The fence table.
        table: String,
        /// The role.
        role: String,
        /// This writer's term.
        term: i64,
        /// This writer's pair.
        token: FencingToken,
        /// The newest term that wrote.
        newer_term: i64,
        /// Its member.
        newer_member: String,
    },
    /// The table name is not one this library accepts (see [`Fence::new`]).
    #[error(
        "invalid fence table name `{table}`: {reason}; use lowercase letters, digits and \
         underscores, starting with a letter or an underscore, at most 63 bytes, optionally \
         after a schema name and a dot (`app.coordination_fence`)"
    )]
    InvalidTable {
        /// The name given.
        table: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The claim cannot be written: a term below zero comes from a transport that could not
    /// report the term's offset, and cannot be ordered.
    #[error(
        "the claim of role `{role}` has term {term}: a negative term (a transport that did not \
         report the lease's offset) cannot be fenced"
    )]
    InvalidClaim {
        /// The role.
        role: String,
        /// The term.
        term: i64,
    },
    /// The fence table does not exist in the database the connection points at.
    #[error(
        "the fence table `{table}` does not exist: create it first with Fence::migrate (or run \
         the SQL of Fence::migration_sql) in this database"
    )]
    MissingTable {
        /// The table.
        table: String,
        /// The database's answer.
        #[source]
        source: ::postgres::Error,
    },
    /// The connection to PostgreSQL ended while the transaction was open (a server shut down or
    /// killed the session, a network failure, the idle-in-transaction timeout). PostgreSQL rolls
    /// back a transaction whose session ends: nothing of it was committed. Reconnect and run the
    /// transaction again (a leader whose term is still running writes again).
    #[error(
        "the connection to PostgreSQL was lost during the fenced transaction (table `{table}`, \
         role `{role}`): nothing of the transaction was committed; reconnect and run it again"
    )]
    ConnectionLost {
        /// The fence table.
        table: String,
        /// The role.
        role: String,
        /// The client's error.
        #[source]
        source: ::postgres::Error,
    },
    /// Another transaction changed the role's fence row at the same time, and this transaction's
    /// isolation level (REPEATABLE READ or SERIALIZABLE) cannot run after it: roll back and run
    /// the transaction again (it is then either accepted or fenced).
    #[error(
        "another writer of role `{role}` changed the fence row in `{table}` concurrently and this \
         transaction's isolation level cannot see it: roll back and retry"
    )]
    Conflict {
        /// The fence table.
        table: String,
        /// The role.
        role: String,
        /// The database's answer.
        #[source]
        source: ::postgres::Error,
    },
    /// Any other database error (permissions, a table of another shape, a transaction already
    /// aborted by an earlier statement).
    #[error("the fence table `{table}`: {source}")]
    Database {
        /// The fence table.
        table: String,
        /// The database's answer.
        #[source]
        source: ::postgres::Error,
    },
}

impl FenceError {
    /// Whether a newer term already wrote ([`FenceError::Fenced`]).
    pub fn is_fenced(&self) -> bool {
        matches!(self, FenceError::Fenced { .. })
    }

    /// Whether running the transaction again can succeed: the connection was lost, or a
    /// concurrent writer of the role made a REPEATABLE READ or SERIALIZABLE transaction fail.
    pub fn is_retriable(&self) -> bool {
        matches!(
            self,
            FenceError::ConnectionLost { .. } | FenceError::Conflict { .. }
        )
    }
}

impl From<FenceError> for Error {
    /// [`FenceError::Fenced`] becomes [`Error::Fenced`] with the writer's pair; the others a
    /// [`Error::Transport`] whose message is the fence error's (and whose source it is).
    fn from(e: FenceError) -> Error {
        match e {
            FenceError::Fenced { token, .. } => Error::Fenced { token },
            other => {
                let message = other.to_string();
                let error = if other.is_retriable() {
                    TransportError::retriable(message)
                } else {
                    TransportError::fatal(message)
                };
                Error::Transport(error.with_source(other))
            }
        }
    }
}

/// A fence table: one row per role, holding the newest term that wrote. Cheap to clone; holds
/// no connection.
#[derive(Clone, PartialEq, Eq)]
pub struct Fence {
    table: String,
    quoted: String,
}

impl fmt::Debug for Fence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Fence").field(&self.table).finish()
    }
}

impl Default for Fence {
    /// The fence in table [`DEFAULT_TABLE`] (`coordination_fence`), in the connection's
    /// search path.
    fn default() -> Fence {
        Fence::new(DEFAULT_TABLE).unwrap_or_else(|_| unreachable!("the default name is valid"))
    }
}

/// Checks one part of a table name; `Err` says why it is refused.
fn identifier(part: &str) -> Result<(), &'static str> {
    let mut chars = part.chars();
    match chars.next() {
        None => return Err("a part of the name is empty"),
        Some(c) if !(c.is_ascii_lowercase() || c == '_') => {
            return Err("a part does not start with a lowercase letter or an underscore")
        }
        Some(_) => {}
    }
    if !chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_') {
        return Err("it has a character other than a lowercase letter, a digit or an underscore");
    }
    if part.len() > 63 {
        return Err("a part is longer than PostgreSQL's 63 bytes");
    }
    Ok(())
}

impl Fence {
    /// The fence in table `table`: `name` or `schema.name`, each part lowercase ASCII letters,
    /// digits and underscores, starting with a letter or an underscore, at most 63 bytes. The
    /// name is quoted in every statement, so a reserved word is fine too.
    pub fn new(table: &str) -> Result<Fence, FenceError> {
        let invalid = |reason| FenceError::InvalidTable {
            table: table.to_owned(),
            reason,
        };
        let parts: Vec<&str> = table.split('.').collect();
        if parts.len() > 2 {
            return Err(invalid("it has more than one dot"));
        }
        for part in &parts {
            identifier(part).map_err(invalid)?;
        }
        let quoted = parts
            .iter()
            .map(|p| format!("\"{p}\""))
            .collect::<Vec<_>>()
            .join(".");
        Ok(Fence {
            table: table.to_owned(),
            quoted,
        })
    }

    /// The table's name, as given.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// The statement that creates the table when it is missing (what [`Fence::migrate`] runs),
    /// for a migration tool of your own.
    pub fn migration_sql(&self) -> String {
        format!(
            "CREATE TABLE IF NOT EXISTS {} (\n    \
             role           text        PRIMARY KEY,\n    \
             term           bigint      NOT NULL CHECK (term >= 0),\n    \
             producer_id    bigint      NOT NULL,\n    \
             producer_epoch smallint    NOT NULL,\n    \
             member         text        NOT NULL,\n    \
             written_at     timestamptz NOT NULL DEFAULT now()\n)",
            self.quoted
        )
    }

    /// The statement [`Fence::advance`] runs, with parameters `$1` role, `$2` term,
    /// `$3` producer id, `$4` producer epoch, `$5` member; it returns one row when the write
    /// may go on and none when a newer term already wrote.
    pub fn advance_sql(&self) -> String {
        format!(
            "INSERT INTO {} AS fence (role, term, producer_id, producer_epoch, member, written_at) \
             VALUES ($1, $2, $3, $4, $5, now()) \
             ON CONFLICT (role) DO UPDATE SET term = EXCLUDED.term, \
             producer_id = EXCLUDED.producer_id, producer_epoch = EXCLUDED.producer_epoch, \
             member = EXCLUDED.member, written_at = EXCLUDED.written_at \
             WHERE fence.term <= EXCLUDED.term \
             RETURNING term",
            self.quoted
        )
    }

    fn current_sql(&self) -> String {
        format!(
            "SELECT role, term, producer_id, producer_epoch, member FROM {} WHERE role = $1",
            self.quoted
        )
    }

    fn check_claim(&self, claim: &Claim) -> Result<(), FenceError> {
        if claim.term < 0 {
            return Err(FenceError::InvalidClaim {
                role: claim.role.clone(),
                term: claim.term,
            });
        }
        Ok(())
    }

    /// Sorts a database error: a missing table, a lost connection, a conflict, or other.
    fn classify(&self, role: &str, source: ::postgres::Error) -> FenceError {
        use ::postgres::error::SqlState;
        let table = self.table.clone();
        let role = role.to_owned();
        let lost = source.is_closed()
            || std::error::Error::source(&source).is_some_and(|s| s.is::<std::io::Error>())
            || source.code().is_some_and(|c| {
                [
                    SqlState::ADMIN_SHUTDOWN,
                    SqlState::CRASH_SHUTDOWN,
                    SqlState::CANNOT_CONNECT_NOW,
                    SqlState::IDLE_IN_TRANSACTION_SESSION_TIMEOUT,
                ]
                .contains(c)
            });
        match source.code() {
            Some(c) if *c == SqlState::UNDEFINED_TABLE => {
                FenceError::MissingTable { table, source }
            }
            Some(c)
                if *c == SqlState::T_R_SERIALIZATION_FAILURE
                    || *c == SqlState::T_R_DEADLOCK_DETECTED =>
            {
                FenceError::Conflict {
                    table,
                    role,
                    source,
                }
            }
            _ if lost => FenceError::ConnectionLost {
                table,
                role,
                source,
            },
            _ => FenceError::Database { table, source },
        }
    }

    fn fenced(&self, claim: &Claim, newer: Option<FenceRow>) -> FenceError {
        let (newer_term, newer_member) =
            newer.map_or((i64::MAX, "?".to_owned()), |r| (r.term, r.member));
        FenceError::Fenced {
            table: self.table.clone(),
            role: claim.role.clone(),
            term: claim.term,
            token: claim.token,
            newer_term,
            newer_member,
        }
    }

    /// Creates the table when it is missing (`CREATE TABLE IF NOT EXISTS`; see
    /// [`Fence::migration_sql`]). Safe to run at every start-up, from every member.
    pub fn migrate(&self, client: &mut impl ::postgres::GenericClient) -> Result<(), FenceError> {
        client
            .batch_execute(&self.migration_sql())
            .map_err(|e| self.classify("", e))
    }

    /// Inside the caller's transaction: records that `claim`'s term writes, or fails with
    /// [`FenceError::Fenced`] when a newer term of the role has already written. Call it before
    /// the transaction's other statements (it locks the role's row until the transaction
    /// ends, so writers of one role take turns) and commit only when it returned `Ok`.
    ///
    /// A term may write any number of times; a term equal to the recorded one is accepted.
    /// On any error the transaction is unusable: drop it (it rolls back) or roll it back.
    pub fn advance(
        &self,
        transaction: &mut ::postgres::Transaction<'_>,
        claim: &Claim,
    ) -> Result<(), FenceError> {
        self.check_claim(claim)?;
        let row = transaction
            .query_opt(&self.advance_sql(), &advance_params(claim))
            .map_err(|e| self.classify(&claim.role, e))?;
        if row.is_some() {
            return Ok(());
        }
        let newer = self.current(transaction, &claim.role)?;
        Err(self.fenced(claim, newer))
    }

    /// The role's fence row: the newest term that wrote, or `None` when no term wrote yet.
    pub fn current(
        &self,
        client: &mut impl ::postgres::GenericClient,
        role: &str,
    ) -> Result<Option<FenceRow>, FenceError> {
        let row = client
            .query_opt(&self.current_sql(), &[&role])
            .map_err(|e| self.classify(role, e))?;
        row.map(|r| self.row(role, &r)).transpose()
    }

    fn row(&self, role: &str, r: &::postgres::Row) -> Result<FenceRow, FenceError> {
        let get = || -> Result<FenceRow, ::postgres::Error> {
            Ok(FenceRow {
                role: r.try_get(0)?,
                term: r.try_get(1)?,
                token: FencingToken::new(r.try_get(2)?, r.try_get(3)?),
                member: r.try_get(4)?,
            })
        };
        get().map_err(|e| self.classify(role, e))
    }
}

/// The parameters of [`Fence::advance_sql`] for `claim`, in its order ($1 to $5), for the
/// blocking and the async client alike.
fn advance_params(claim: &Claim) -> [&(dyn ::postgres::types::ToSql + Sync); 5] {
    [
        &claim.role,
        &claim.term,
        &claim.token.producer_id,
        &claim.token.producer_epoch,
        &claim.member,
    ]
}

/// The same calls on `tokio-postgres` (features `postgres` and `tokio`).
#[cfg(feature = "tokio")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
impl Fence {
    /// [`Fence::migrate`] on a `tokio_postgres` client or transaction.
    pub async fn migrate_async(
        &self,
        client: &impl tokio_postgres::GenericClient,
    ) -> Result<(), FenceError> {
        client
            .batch_execute(&self.migration_sql())
            .await
            .map_err(|e| self.classify("", e))
    }

    /// [`Fence::advance`] inside a `tokio_postgres` transaction.
    pub async fn advance_async(
        &self,
        transaction: &tokio_postgres::Transaction<'_>,
        claim: &Claim,
    ) -> Result<(), FenceError> {
        self.check_claim(claim)?;
        let row = transaction
            .query_opt(&self.advance_sql(), &advance_params(claim))
            .await
            .map_err(|e| self.classify(&claim.role, e))?;
        if row.is_some() {
            return Ok(());
        }
        let newer = self.current_async(transaction, &claim.role).await?;
        Err(self.fenced(claim, newer))
    }

    /// [`Fence::current`] on a `tokio_postgres` client or transaction.
    pub async fn current_async(
        &self,
        client: &impl tokio_postgres::GenericClient,
        role: &str,
    ) -> Result<Option<FenceRow>, FenceError> {
        let row = client
            .query_opt(&self.current_sql(), &[&role])
            .await
            .map_err(|e| self.classify(role, e))?;
        row.map(|r| self.row(role, &r)).transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_names_are_checked_and_quoted() {
        assert_eq!(Fence::new("jobs_fence").unwrap().quoted, "\"jobs_fence\"");
        assert_eq!(
            Fence::new("app.fence2").unwrap().quoted,
            "\"app\".\"fence2\""
        );
        assert_eq!(Fence::new("user").unwrap().quoted, "\"user\"");
        for bad in [
            "",
            "Fence",
            "fence; DROP TABLE x",
            "a.b.c",
            "9lives",
            "fence\"",
            ".fence",
            "fence.",
            &"x".repeat(64),
        ] {
            let e = Fence::new(bad).unwrap_err();
            assert!(matches!(e, FenceError::InvalidTable { .. }), "{bad}: {e}");
            assert!(e.to_string().contains("invalid fence table name"), "{e}");
        }
        assert_eq!(Fence::default().table(), DEFAULT_TABLE);
    }

    #[test]
    fn a_fenced_error_becomes_the_librarys_fenced_error() {
        let token = FencingToken::new(7, 3);
        let e = FenceError::Fenced {
            table: "f".into(),
            role: "jobs".into(),
            term: 4,
            token,
            newer_term: 9,
            newer_member: "b".into(),
        };
        assert!(e.is_fenced() && !e.is_retriable());
        assert!(
            e.to_string()
                .starts_with("fenced: term 4 (7/3) of role `jobs`"),
            "{e}"
        );
        let lib: Error = e.into();
        assert!(matches!(lib, Error::Fenced { token: t } if t == token));
    }
}
