//! `--postgres`: members also write a row per job to a PostgreSQL table through the database
//! fence (`kafka_coordination::postgres::Fence`), and the checker reads the table back.
//!
//! Each row carries (role, term, member process, sequence). The fence locks a role's row from
//! `advance` to the end of the transaction, and each row is inserted after `advance`, so a
//! role's rows in id order are in commit order. The checker then proves, per role: no row of a
//! term follows a row of a newer term (a deposed term's write after its successor's first
//! write), and every write a member journaled as acknowledged (PG_ACK: its COMMIT returned) is
//! in the table. It also counts the stale writes the fence refused (PG_REFUSED).

#[cfg(feature = "postgres")]
pub use with_postgres::*;
#[cfg(not(feature = "postgres"))]
pub use without_postgres::*;

/// The run's two tables, named after the run.
#[derive(Clone, Debug)]
pub struct Tables {
    pub fence: String,
    pub rows: String,
}

impl Tables {
    pub fn for_run(run_id: &str) -> Tables {
        let id: String = run_id
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '_'
                }
            })
            .collect();
        Tables {
            fence: format!("chaos_fence_{id}"),
            rows: format!("chaos_rows_{id}"),
        }
    }
}

/// What a member's write did.
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
pub enum Outcome {
    /// Committed.
    Acked,
    /// Refused by the fence: a newer term wrote (its term).
    Refused(i64),
    /// Anything else (a lost connection, no connection): nothing committed, or (a COMMIT
    /// without an answer) unknown.
    Failed(String),
}

/// What the checker found in the table.
#[derive(Debug, Default)]
pub struct Figures {
    pub rows: usize,
    pub acked: usize,
    pub missing: Vec<String>,
    pub stale: Vec<String>,
    pub refused: usize,
    pub failed: usize,
    /// Terms that wrote rows.
    pub terms: usize,
}

#[cfg(not(feature = "postgres"))]
mod without_postgres {
    use super::{Figures, Outcome, Tables};
    use crate::journal::Journals;
    use kafka_coordination::leadership::Leadership;

    const NO: &str = "the chaos suite was built without the `postgres` feature \
                      (cargo build --features kafka-coordination-examples/postgres)";

    pub fn create(_: &str, _: &Tables, _: u64) -> Result<(), String> {
        Err(NO.to_owned())
    }

    pub struct Writer;

    impl Writer {
        pub fn new(_: &str, _: &Tables, _: u64) -> Writer {
            Writer
        }
        pub fn write(&mut self, _: &Leadership, _: u64, _: u64) -> Outcome {
            Outcome::Failed(NO.to_owned())
        }
    }

    pub fn check(_: &str, _: &Tables, _: &Journals) -> Result<Figures, String> {
        Err(NO.to_owned())
    }

    pub fn forge(_: &str, _: &Tables, _: &std::path::Path) -> Result<(), String> {
        Err(NO.to_owned())
    }
}

#[cfg(feature = "postgres")]
mod with_postgres {
    use std::collections::{BTreeMap, HashSet};
    use std::path::Path;

    use kafka_coordination::leadership::Leadership;
    use kafka_coordination::postgres::{Claim, Fence, FenceError};
    use kafka_coordination::{Clock, SystemClock};
    use postgres::{Client, NoTls};

    use super::{Figures, Outcome, Tables};
    use crate::journal::Journals;

    fn connect(url: &str) -> Result<Client, String> {
        Client::connect(url, NoTls).map_err(|e| format!("connecting to PostgreSQL: {e}"))
    }

    /// Creates the fence table and the rows table.
    pub fn create(url: &str, tables: &Tables, _lease_ms: u64) -> Result<(), String> {
        let mut db = connect(url)?;
        let fence = Fence::new(&tables.fence).map_err(|e| e.to_string())?;
        fence.migrate(&mut db).map_err(|e| e.to_string())?;
        db.batch_execute(&format!(
            "CREATE TABLE IF NOT EXISTS {} (id bigserial PRIMARY KEY, role text NOT NULL, \
             term bigint NOT NULL, member text NOT NULL, instance bigint NOT NULL, \
             seq bigint NOT NULL)",
            tables.rows
        ))
        .map_err(|e| format!("creating {}: {e}", tables.rows))
    }

    /// A member's connection (made again after it is lost) and the fence.
    pub struct Writer {
        url: String,
        tables: Tables,
        fence: Fence,
        db: Option<Client>,
        /// The idle-in-transaction timeout of the sessions: a member stopped (SIGSTOP) in
        /// the middle of a transaction holds the fence row of its role no longer than this.
        idle_ms: u64,
    }

    impl Writer {
        pub fn new(url: &str, tables: &Tables, lease_ms: u64) -> Writer {
            Writer {
                url: url.to_owned(),
                tables: tables.clone(),
                fence: Fence::new(&tables.fence).unwrap_or_default(),
                db: None,
                idle_ms: 2 * lease_ms,
            }
        }

        /// One job's row: advance the fence, insert, commit.
        pub fn write(&mut self, leadership: &Leadership, instance: u64, seq: u64) -> Outcome {
            if self.db.as_ref().is_none_or(Client::is_closed) {
                match connect(&self.url).and_then(|mut db| {
                    db.batch_execute(&format!(
                        "SET idle_in_transaction_session_timeout = {}",
                        self.idle_ms
                    ))
                    .map_err(|e| e.to_string())?;
                    Ok(db)
                }) {
                    Ok(db) => self.db = Some(db),
                    Err(e) => return Outcome::Failed(e),
                }
            }
            let Some(db) = self.db.as_mut() else {
                return Outcome::Failed("no connection".to_owned());
            };
            let claim = Claim::of(leadership);
            let mut tx = match db.transaction() {
                Ok(tx) => tx,
                Err(e) => return Outcome::Failed(format!("BEGIN: {e}")),
            };
            match self.fence.advance(&mut tx, &claim) {
                Ok(()) => {}
                Err(FenceError::Fenced { newer_term, .. }) => return Outcome::Refused(newer_term),
                Err(e) => return Outcome::Failed(e.to_string()),
            }
            let insert = format!(
                "INSERT INTO {} (role, term, member, instance, seq) VALUES ($1, $2, $3, $4, $5)",
                self.tables.rows
            );
            if let Err(e) = tx.execute(
                &insert,
                &[
                    &claim.role(),
                    &claim.term(),
                    &claim.member(),
                    &(instance as i64),
                    &(seq as i64),
                ],
            ) {
                return Outcome::Failed(format!("INSERT: {e}"));
            }
            match tx.commit() {
                Ok(()) => Outcome::Acked,
                Err(e) => Outcome::Failed(format!("COMMIT: {e}")),
            }
        }
    }

    /// Reads the table back and checks it against the journals.
    pub fn check(url: &str, tables: &Tables, j: &Journals) -> Result<Figures, String> {
        let mut db = connect(url)?;
        let rows = db
            .query(
                &format!(
                    "SELECT id, role, term, instance, seq FROM {} ORDER BY id",
                    tables.rows
                ),
                &[],
            )
            .map_err(|e| format!("reading {}: {e}", tables.rows))?;
        let mut f = Figures {
            rows: rows.len(),
            acked: j.pg_acks.len(),
            refused: j.pg_refused,
            failed: j.pg_failed,
            ..Figures::default()
        };
        let mut newest: BTreeMap<String, (i64, i64)> = BTreeMap::new();
        let mut present = HashSet::new();
        let mut terms = HashSet::new();
        for r in &rows {
            let (id, role, term, instance, seq): (i64, String, i64, i64, i64) =
                (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4));
            terms.insert((role.clone(), term));
            match newest.get(&role) {
                Some(&(newer, first_id)) if term < newer => f.stale.push(format!(
                    "row {id} of role {role}: term {term} (process #{instance}, seq {seq}) \
                     after term {newer}'s first write (row {first_id})"
                )),
                Some(&(newer, _)) if term == newer => {}
                _ => {
                    newest.insert(role.clone(), (term, id));
                }
            }
            present.insert((role, instance, seq));
        }
        f.terms = terms.len();
        for a in &j.pg_acks {
            if !present.contains(&(a.role.clone(), a.instance, a.seq)) {
                f.missing.push(format!(
                    "acknowledged row of role {} term {} (process #{}, seq {}) is not in {}",
                    a.role, a.term, a.instance, a.seq, tables.rows
                ));
            }
        }
        Ok(f)
    }

    /// The self-test's forgery: a row of each role's oldest term appended outside the fence,
    /// and a journal that claims a commit the table does not have.
    pub fn forge(url: &str, tables: &Tables, dir: &Path) -> Result<(), String> {
        let mut db = connect(url)?;
        let n = db
            .execute(
                &format!(
                    "INSERT INTO {t} (role, term, member, instance, seq) \
                     SELECT role, min(term), 'forger', 999999, 1 FROM {t} GROUP BY role \
                     HAVING min(term) < max(term)",
                    t = tables.rows
                ),
                &[],
            )
            .map_err(|e| format!("forging rows: {e}"))?;
        if n == 0 {
            return Err("no role had two terms that wrote rows: nothing to forge".to_owned());
        }
        let line = crate::format::line(
            SystemClock.now().0,
            "PG_ACK",
            &[
                ("role", "forged-role".to_owned()),
                ("instance", "999998".to_owned()),
                ("term", "1".to_owned()),
                ("seq", "1".to_owned()),
            ],
        );
        std::fs::write(dir.join("journal-forged-pg.log"), format!("{line}\n"))
            .map_err(|e| format!("cannot write the forged journal: {e}"))
    }
}
