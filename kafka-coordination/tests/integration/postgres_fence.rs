//! The database fence (`kafka_coordination::postgres`) against a real PostgreSQL server.
//!
//! `scripts/postgres/with-postgres.sh cargo test -p kafka-coordination --features postgres,tokio --test integration postgres_fence::`
//! starts a throwaway cluster and exports `KC_POSTGRES_URL`. Without it every test says so
//! loudly and returns. Each test uses tables of its own, so the tests run in parallel.

use std::io::Write;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use kafka_coordination::core::token::FencingToken;
use kafka_coordination::postgres::{Claim, Fence, FenceError, FenceRow};
use postgres::{Client, NoTls};

fn url() -> Option<String> {
    match std::env::var("KC_POSTGRES_URL") {
        Ok(u) if !u.trim().is_empty() => Some(u),
        _ => {
            static LOUD: std::sync::Once = std::sync::Once::new();
            LOUD.call_once(|| {
                let _ = writeln!(
                    std::io::stderr(),
                    "\n*** SKIPPED: KC_POSTGRES_URL is not set, so the PostgreSQL fence tests ran \
                     against nothing. Run: scripts/postgres/with-postgres.sh cargo test -p \
                     kafka-coordination --features postgres,tokio --test integration postgres_fence:: ***\n"
                );
            });
            None
        }
    }
}

fn connect(url: &str) -> Client {
    Client::connect(url, NoTls).expect("connect to KC_POSTGRES_URL")
}

/// A table name no other test (or earlier run) uses.
fn unique(prefix: &str) -> String {
    static SEQ: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "{prefix}_{}_{nanos:x}_{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    )
}

/// A fence and a table of job runs beside it (id in insertion order, the writing term).
fn setup(db: &mut Client) -> (Fence, String) {
    let fence = Fence::new(&unique("fence")).unwrap();
    fence.migrate(db).unwrap();
    let runs = unique("runs");
    db.batch_execute(&format!(
        "CREATE TABLE {runs} (id bigserial PRIMARY KEY, role text NOT NULL, term bigint NOT NULL, job text NOT NULL)"
    ))
    .unwrap();
    (fence, runs)
}

fn claim(role: &str, term: i64) -> Claim {
    Claim::new(
        role,
        format!("member-{term}"),
        term,
        FencingToken::new(1000 + term, 0),
    )
}

/// One fenced transaction: a job row written before the fence and one after, committed when
/// the fence lets the claim write.
fn write(
    db: &mut Client,
    fence: &Fence,
    runs: &str,
    claim: &Claim,
    job: &str,
) -> Result<(), FenceError> {
    let mut tx = db.transaction().unwrap();
    let insert = format!("INSERT INTO {runs} (role, term, job) VALUES ($1, $2, $3)");
    tx.execute(
        &insert,
        &[&claim.role(), &claim.term(), &format!("{job}:before")],
    )
    .unwrap();
    fence.advance(&mut tx, claim)?;
    tx.execute(
        &insert,
        &[&claim.role(), &claim.term(), &format!("{job}:after")],
    )
    .unwrap();
    tx.commit().unwrap();
    Ok(())
}

fn rows(db: &mut Client, runs: &str) -> Vec<(String, i64, String)> {
    db.query(
        &format!("SELECT role, term, job FROM {runs} ORDER BY id"),
        &[],
    )
    .unwrap()
    .iter()
    .map(|r| (r.get(0), r.get(1), r.get(2)))
    .collect()
}

fn jobs(rows: &[(String, i64, String)]) -> Vec<&str> {
    rows.iter().map(|r| r.2.as_str()).collect()
}

#[test]
fn a_newer_term_refuses_an_older_one_and_its_whole_transaction_rolls_back() {
    let Some(url) = url() else { return };
    let mut db = connect(&url);
    let (fence, runs) = setup(&mut db);
    fence
        .migrate(&mut db)
        .expect("the migration runs again harmlessly");
    assert_eq!(fence.current(&mut db, "jobs").unwrap(), None);

    write(&mut db, &fence, &runs, &claim("jobs", 5), "a").unwrap();
    write(&mut db, &fence, &runs, &claim("jobs", 7), "b").unwrap();
    let e = write(&mut db, &fence, &runs, &claim("jobs", 5), "c").unwrap_err();
    match &e {
        FenceError::Fenced {
            role,
            term,
            newer_term,
            newer_member,
            ..
        } => {
            assert_eq!((role.as_str(), *term, *newer_term), ("jobs", 5, 7));
            assert_eq!(newer_member, "member-7");
        }
        other => panic!("expected Fenced, got {other:?}"),
    }
    assert!(e.is_fenced());
    assert!(
        e.to_string()
            .contains("term 7 (member `member-7`) already wrote"),
        "{e}"
    );
    let lib: kafka_coordination::Error = e.into();
    assert!(lib.is_fenced());
    // The refused transaction left nothing, not even the row written before the fence.
    assert_eq!(
        jobs(&rows(&mut db, &runs)),
        ["a:before", "a:after", "b:before", "b:after"]
    );
    assert_eq!(
        fence.current(&mut db, "jobs").unwrap(),
        Some(FenceRow {
            role: "jobs".into(),
            term: 7,
            token: FencingToken::new(1007, 0),
            member: "member-7".into(),
        })
    );
    // A term below zero cannot be ordered.
    let mut tx = db.transaction().unwrap();
    let e = fence.advance(&mut tx, &claim("jobs", -1)).unwrap_err();
    assert!(
        matches!(e, FenceError::InvalidClaim { term: -1, .. }),
        "{e:?}"
    );
}

#[test]
fn the_same_term_writes_again_and_roles_are_fenced_apart() {
    let Some(url) = url() else { return };
    let mut db = connect(&url);
    let (fence, runs) = setup(&mut db);
    for n in 0..3 {
        write(&mut db, &fence, &runs, &claim("jobs", 4), &format!("j{n}")).unwrap();
    }
    // Another role's terms are its own: a low term of `reports` is not fenced by `jobs`.
    write(&mut db, &fence, &runs, &claim("reports", 1), "r").unwrap();
    assert_eq!(rows(&mut db, &runs).len(), 8);
    assert_eq!(fence.current(&mut db, "jobs").unwrap().unwrap().term, 4);
    assert_eq!(fence.current(&mut db, "reports").unwrap().unwrap().term, 1);
}

#[test]
fn role_names_with_sql_metacharacters_are_plain_data() {
    let Some(url) = url() else { return };
    let mut db = connect(&url);
    let (fence, runs) = setup(&mut db);
    let roles = [
        format!("x'); DROP TABLE {runs}; --"),
        format!("\"{}\"; DELETE FROM {runs}", fence.table()),
        "o'brien\\; $1 $$ -- ".to_owned(),
        "ролевая ☃".to_owned(),
    ];
    for (i, role) in roles.iter().enumerate() {
        write(&mut db, &fence, &runs, &claim(role, 10 + i as i64), "w").unwrap();
        let e = write(&mut db, &fence, &runs, &claim(role, 1), "stale").unwrap_err();
        assert!(e.is_fenced(), "{e:?}");
    }
    // Both tables are intact and each role has its own row, named exactly.
    assert_eq!(rows(&mut db, &runs).len(), 2 * roles.len());
    for (i, role) in roles.iter().enumerate() {
        let row = fence
            .current(&mut db, role)
            .unwrap()
            .expect("a row per role");
        assert_eq!(
            (row.role.as_str(), row.term),
            (role.as_str(), 10 + i as i64)
        );
    }
    let count: i64 = db
        .query_one(&format!("SELECT count(*) FROM \"{}\"", fence.table()), &[])
        .unwrap()
        .get(0);
    assert_eq!(count, roles.len() as i64);
    // Table names are checked before they reach SQL.
    let e = Fence::new(&format!("f; DROP TABLE {runs}")).unwrap_err();
    assert!(matches!(e, FenceError::InvalidTable { .. }), "{e:?}");
}

#[test]
fn a_missing_table_is_named_with_the_migration_to_run() {
    let Some(url) = url() else { return };
    let mut db = connect(&url);
    let fence = Fence::new(&unique("never_migrated")).unwrap();
    let mut tx = db.transaction().unwrap();
    let e = fence.advance(&mut tx, &claim("jobs", 1)).unwrap_err();
    assert!(matches!(e, FenceError::MissingTable { .. }), "{e:?}");
    let text = e.to_string();
    assert!(
        text.contains(fence.table()) && text.contains("Fence::migrate"),
        "{text}"
    );
    drop(tx);
    let e = fence.current(&mut db, "jobs").unwrap_err();
    assert!(matches!(e, FenceError::MissingTable { .. }), "{e:?}");
    // A schema that does not exist: the same error.
    let fence = Fence::new(&format!("{}.fence", unique("no_schema"))).unwrap();
    let e = fence.current(&mut db, "jobs").unwrap_err();
    assert!(matches!(e, FenceError::MissingTable { .. }), "{e:?}");
}

/// The backend pid of `db`'s session.
fn backend(db: &mut Client) -> i32 {
    db.query_one("SELECT pg_backend_pid()", &[]).unwrap().get(0)
}

/// Waits until `pred` holds on `probe`'s view of the server (an event, not a sleep: `pred`
/// reads pg_stat_activity), failing after a minute.
fn wait_for(probe: &mut Client, what: &str, mut pred: impl FnMut(&mut Client) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !pred(probe) {
        assert!(Instant::now() < deadline, "waited a minute for {what}");
        thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_connection_killed_in_the_middle_of_a_transaction_leaves_nothing() {
    let Some(url) = url() else { return };
    let mut admin = connect(&url);
    let (fence, runs) = setup(&mut admin);
    for killed_after_fence in [false, true] {
        let mut db = connect(&url);
        let pid = backend(&mut db);
        let mut tx = db.transaction().unwrap();
        let insert = format!("INSERT INTO {runs} (role, term, job) VALUES ('jobs', 3, 'half')");
        tx.execute(&insert, &[]).unwrap();
        if killed_after_fence {
            fence.advance(&mut tx, &claim("jobs", 3)).unwrap();
        }
        let killed: bool = admin
            .query_one("SELECT pg_terminate_backend($1)", &[&pid])
            .unwrap()
            .get(0);
        assert!(killed);
        wait_for(&mut admin, "the killed backend to exit", |a| {
            let n: i64 = a
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity WHERE pid = $1",
                    &[&pid],
                )
                .unwrap()
                .get(0);
            n == 0
        });
        let e = fence.advance(&mut tx, &claim("jobs", 3)).unwrap_err();
        assert!(
            matches!(e, FenceError::ConnectionLost { .. }),
            "expected ConnectionLost, got {e:?}"
        );
        assert!(e.is_retriable());
        let text = e.to_string();
        assert!(
            text.contains("lost") && text.contains("nothing of the transaction was committed"),
            "{text}"
        );
        assert!(tx.commit().is_err(), "a lost transaction does not commit");
    }
    assert!(
        rows(&mut admin, &runs).is_empty(),
        "half a transaction was written"
    );
    assert_eq!(fence.current(&mut admin, "jobs").unwrap(), None);
}

#[test]
fn an_older_writer_in_the_middle_of_its_transaction_holds_off_the_newer_term_then_is_fenced() {
    let Some(url) = url() else { return };
    let mut admin = connect(&url);
    let (fence, runs) = setup(&mut admin);
    let mut old = connect(&url);
    let mut new = connect(&url);
    let new_pid = backend(&mut new);

    // Term 3 has advanced the fence and holds the row; term 4's first write must wait for it.
    let mut tx = old.transaction().unwrap();
    fence.advance(&mut tx, &claim("jobs", 3)).unwrap();
    let newer = {
        let (fence, runs) = (fence.clone(), runs.clone());
        thread::spawn(move || write(&mut new, &fence, &runs, &claim("jobs", 4), "new"))
    };
    wait_for(&mut admin, "term 4 to wait for the fence row's lock", |a| {
        let waiting: Option<String> = a
            .query_opt(
                "SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1",
                &[&new_pid],
            )
            .unwrap()
            .and_then(|r| r.get(0));
        waiting.as_deref() == Some("Lock")
    });
    tx.execute(
        &format!("INSERT INTO {runs} (role, term, job) VALUES ('jobs', 3, 'old')"),
        &[],
    )
    .unwrap();
    tx.commit().unwrap();
    newer.join().unwrap().unwrap();
    // Term 3's next transaction comes after term 4's first write: refused.
    let e = write(&mut old, &fence, &runs, &claim("jobs", 3), "late").unwrap_err();
    assert!(e.is_fenced(), "{e:?}");
    // Term 4's row written before its fence call took its id before the wait; its row after
    // the fence call comes after term 3's (so: call `advance` first in a transaction).
    assert_eq!(
        jobs(&rows(&mut admin, &runs)),
        ["new:before", "old", "new:after"]
    );
}

/// Rows of a term older than one already written before them, in insertion order: the
/// writes of a deposed term after its successor's first write. Rows inserted before the
/// transaction's fence call (`:before`) are left out: they took their ids before the fence
/// made the transaction wait its turn (they are in the table only if it then committed).
fn stale_rows(rows: &[(String, i64, String)]) -> usize {
    let mut newest = i64::MIN;
    let mut stale = 0;
    for (_, term, _) in rows.iter().filter(|r| !r.2.ends_with(":before")) {
        if *term < newest {
            stale += 1;
        }
        newest = newest.max(*term);
    }
    stale
}

#[test]
fn concurrent_writers_of_two_terms_never_interleave_after_the_newer_writes() {
    let Some(url) = url() else { return };
    let mut admin = connect(&url);
    let (fence, runs) = setup(&mut admin);
    const WRITES: usize = 40;
    let start = Arc::new(Barrier::new(2));
    let writers: Vec<_> = [1_i64, 2]
        .into_iter()
        .map(|term| {
            let (fence, runs, url, start) =
                (fence.clone(), runs.clone(), url.clone(), start.clone());
            thread::spawn(move || {
                let mut db = connect(&url);
                start.wait();
                let (mut acked, mut refused) = (0, 0);
                for n in 0..WRITES {
                    match write(
                        &mut db,
                        &fence,
                        &runs,
                        &claim("jobs", term),
                        &format!("{term}-{n}"),
                    ) {
                        Ok(()) => acked += 1,
                        Err(e) if e.is_fenced() => refused += 1,
                        Err(e) => panic!("{e}"),
                    }
                }
                (acked, refused)
            })
        })
        .collect();
    let results: Vec<(usize, usize)> = writers.into_iter().map(|w| w.join().unwrap()).collect();
    let written = rows(&mut admin, &runs);
    // Whatever the interleaving: term 2 is never refused, every acknowledged write is there
    // (two rows each), and no row of term 1 follows a row of term 2.
    assert_eq!(results[1], (WRITES, 0));
    assert_eq!(results[0].0 + results[0].1, WRITES);
    assert_eq!(written.len(), 2 * (results[0].0 + results[1].0));
    assert_eq!(stale_rows(&written), 0, "{written:?}");
    // Once term 2 wrote, term 1 is refused for good.
    let e = write(&mut admin, &fence, &runs, &claim("jobs", 1), "after").unwrap_err();
    assert!(e.is_fenced());
    // The checker itself finds a stale row written outside the fence.
    admin
        .execute(
            &format!("INSERT INTO {runs} (role, term, job) VALUES ('jobs', 1, 'forged')"),
            &[],
        )
        .unwrap();
    assert_eq!(stale_rows(&rows(&mut admin, &runs)), 1);
}

#[test]
fn a_serializable_transaction_that_meets_a_concurrent_writer_is_told_to_retry() {
    let Some(url) = url() else { return };
    let mut admin = connect(&url);
    let (fence, runs) = setup(&mut admin);
    write(&mut admin, &fence, &runs, &claim("jobs", 1), "first").unwrap();
    let mut a = connect(&url);
    let mut b = connect(&url);
    let (a_pid, b_pid) = (backend(&mut a), backend(&mut b));
    // A serializable transaction takes its snapshot, then a newer term changes the row.
    let mut tx = a
        .build_transaction()
        .isolation_level(postgres::IsolationLevel::Serializable)
        .start()
        .unwrap();
    tx.query_one("SELECT 1", &[]).unwrap();
    let mut other = b.transaction().unwrap();
    fence.advance(&mut other, &claim("jobs", 2)).unwrap();
    let e = thread::scope(|s| {
        let waiter = s.spawn(|| fence.advance(&mut tx, &claim("jobs", 2)));
        // Only once `a` waits for `b`'s row lock does `b` commit: `a` then meets a changed row.
        wait_for(
            &mut admin,
            "the serializable writer to wait for the row",
            |p| {
                p.query_one("SELECT $2 = ANY(pg_blocking_pids($1))", &[&a_pid, &b_pid])
                    .unwrap()
                    .get(0)
            },
        );
        other.commit().unwrap();
        waiter.join().unwrap().unwrap_err()
    });
    assert!(matches!(e, FenceError::Conflict { .. }), "{e:?}");
    assert!(e.is_retriable() && e.to_string().contains("retry"), "{e}");
}

#[cfg(all(feature = "blocking", feature = "memory"))]
#[test]
fn a_claim_of_a_leadership_carries_its_role_member_term_and_pair() {
    let Some(url) = url() else { return };
    use kafka_coordination::{blocking, memory::MemoryBroker, Options, SystemClock};
    let broker = MemoryBroker::new(16, Arc::new(SystemClock));
    let leader =
        blocking::acquire_leadership(broker.transport("a"), "billing", "node-a", Options::new())
            .unwrap();
    let claim = Claim::of(&leader);
    assert_eq!(
        (claim.role(), claim.member(), claim.term(), claim.token()),
        ("billing", "node-a", leader.term(), leader.token())
    );
    let mut db = connect(&url);
    let (fence, runs) = setup(&mut db);
    write(&mut db, &fence, &runs, &claim, "x").unwrap();
    let row = fence.current(&mut db, "billing").unwrap().unwrap();
    assert_eq!(
        (row.term, row.token, row.member.as_str()),
        (leader.term(), leader.token(), "node-a")
    );
}

#[cfg(feature = "tokio")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tokio_calls_fence_the_same_way() {
    let Some(url) = url() else { return };
    let (mut db, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    let conn = tokio::spawn(connection);
    let fence = Fence::new(&unique("fence_async")).unwrap();
    fence.migrate_async(&db).await.unwrap();
    fence.migrate_async(&db).await.unwrap();
    let runs = unique("runs_async");
    db.batch_execute(&format!(
        "CREATE TABLE {runs} (id bigserial PRIMARY KEY, term bigint NOT NULL)"
    ))
    .await
    .unwrap();
    for term in [2_i64, 6, 2] {
        let tx = db.transaction().await.unwrap();
        tx.execute(&format!("INSERT INTO {runs} (term) VALUES ($1)"), &[&term])
            .await
            .unwrap();
        match fence.advance_async(&tx, &claim("jobs", term)).await {
            Ok(()) => tx.commit().await.unwrap(),
            Err(e) => {
                assert!(e.is_fenced() && term == 2, "{e:?}");
                assert!(e.to_string().contains("term 6"), "{e}");
            } // dropped: rolled back
        }
    }
    let terms: Vec<i64> = db
        .query(&format!("SELECT term FROM {runs} ORDER BY id"), &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(terms, [2, 6]);
    assert_eq!(
        fence
            .current_async(&db, "jobs")
            .await
            .unwrap()
            .unwrap()
            .term,
        6
    );
    let missing = Fence::new(&unique("missing_async")).unwrap();
    let e = missing.current_async(&db, "jobs").await.unwrap_err();
    assert!(matches!(e, FenceError::MissingTable { .. }), "{e:?}");
    drop(db);
    conn.await.unwrap().unwrap();
}
