//! A member process: campaigns for every role of the run on one shared Kafka client, and
//! while it leads a role makes guarded writes to the role's data partition, each tagged with
//! (member, process, pair, term, sequence). Every acknowledged write (the guarded write returned
//! its offset) is appended to the process's journal before the next write, so the checker can
//! prove that none is missing; elections, ends of terms and resigns go to the journal too, and
//! to stdout for the orchestrator.
//!
//! The journal is a plain file written one line per `write` call (no user-space buffer): a
//! SIGKILL loses nothing that was written, and at most cuts the line being written.
//!
//! Control on stdin: `resign ROLE PAIR` resigns ROLE if this process leads it with PAIR;
//! `exit` (or the end of stdin) resigns every role, withdraws every candidacy and exits.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use kafka_coordination::core::machine::Status;
use kafka_coordination::kafka::{KafkaConfig, KafkaTransport};
use kafka_coordination::leadership::{Candidacy, Leadership};
use kafka_coordination::{blocking, Clock, GuardedRecord, Options, SystemClock};

use crate::database::{Outcome, Tables, Writer};
use crate::format::{line, Pair, Tag};

/// A member process's settings (from its command line).
#[derive(Clone, Debug)]
pub struct MemberArgs {
    pub member: String,
    pub instance: u64,
    /// The roles, in order: role i writes to partition i of the data topic.
    pub roles: Vec<String>,
    pub bootstrap: String,
    pub state_topic: String,
    pub partitions: i32,
    pub data_topic: String,
    pub journal: PathBuf,
    pub lease: Duration,
    pub renew: Duration,
    pub stagger: Duration,
    pub write_every: Duration,
    /// `--postgres`: the database and the run's tables; each job is also a row written
    /// through the database fence, before its guarded write.
    pub postgres: Option<(String, Tables)>,
}

/// Events the orchestrator follows on stdout (everything also goes to the journal).
const TOLD: &[&str] = &[
    "CANDIDATE",
    "STANDBY",
    "ELECTED",
    "ENDED",
    "RESIGN",
    "RESIGNED",
    "CANDIDACY_FAILED",
];

struct Journal {
    file: Mutex<File>,
}

impl Journal {
    fn log(&self, event: &str, fields: &[(&str, String)]) {
        let mut text = line(SystemClock.now().0, event, fields);
        text.push('\n');
        {
            let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
            if let Err(e) = file.write_all(text.as_bytes()) {
                eprintln!("chaos member: the journal write failed: {e}");
                std::process::exit(3);
            }
        }
        if TOLD.contains(&event) {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(text.as_bytes());
            let _ = out.flush();
        }
    }
}

struct Member {
    args: MemberArgs,
    journal: Journal,
    client: Arc<KafkaTransport>,
    options: Options,
    /// Resigns asked for: (role, pair).
    resigns: Mutex<Vec<(String, Pair)>>,
    exiting: AtomicBool,
    /// The sequence number of the last write (unique per process).
    seq: AtomicU64,
}

/// Runs the member until told to exit (or killed).
pub fn member_main(args: MemberArgs) -> Result<(), String> {
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&args.journal)
        .map_err(|e| format!("cannot open the journal {}: {e}", args.journal.display()))?;
    let config = KafkaConfig::new(args.bootstrap.clone(), args.partitions)
        .with_topic(args.state_topic.clone());
    let client = KafkaTransport::new(config).map_err(|e| format!("the Kafka client: {e}"))?;
    let options = Options::new()
        .lease_duration(args.lease)
        .renew_interval(args.renew)
        .challenge_stagger(args.stagger)
        // Standbys ride out broker restarts instead of ending (and re-registering at the tail).
        .give_up_after(Duration::from_secs(120));
    let member = Arc::new(Member {
        journal: Journal {
            file: Mutex::new(file),
        },
        client: Arc::new(client),
        options,
        resigns: Mutex::new(Vec::new()),
        exiting: AtomicBool::new(false),
        seq: AtomicU64::new(0),
        args,
    });
    member.journal.log(
        "START",
        &[
            ("member", member.args.member.clone()),
            ("instance", member.args.instance.to_string()),
            ("pid", std::process::id().to_string()),
            ("roles", member.args.roles.join(",")),
        ],
    );
    let control = Arc::clone(&member);
    thread::spawn(move || control.read_commands());
    let campaigns: Vec<_> = (0..member.args.roles.len())
        .map(|i| {
            let m = Arc::clone(&member);
            thread::spawn(move || m.campaign(i))
        })
        .collect();
    for c in campaigns {
        let _ = c.join();
    }
    member.journal.log("EXIT", &[]);
    Ok(())
}

impl Member {
    fn exiting(&self) -> bool {
        self.exiting.load(Ordering::SeqCst)
    }

    fn read_commands(&self) {
        let stdin = std::io::stdin();
        for command in stdin.lock().lines() {
            let Ok(command) = command else { break };
            let words: Vec<&str> = command.split_whitespace().collect();
            match words.as_slice() {
                ["resign", role, pair] => match pair.parse::<Pair>() {
                    Ok(pair) => self
                        .resigns
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(((*role).to_owned(), pair)),
                    Err(e) => eprintln!("chaos member: bad command `{command}`: {e}"),
                },
                ["exit"] => break,
                _ => eprintln!("chaos member: unknown command `{command}`"),
            }
        }
        self.exiting.store(true, Ordering::SeqCst);
    }

    fn resign_asked(&self, role: &str, pair: Pair) -> bool {
        let mut asked = self.resigns.lock().unwrap_or_else(|e| e.into_inner());
        let before = asked.len();
        asked.retain(|(r, p)| !(r == role && *p == pair));
        asked.len() != before
    }

    /// Campaigns for role `index` until the process exits: standby, leader, and again.
    fn campaign(&self, index: usize) {
        let role = self.args.roles[index].clone();
        let r = || ("role", role.clone());
        while !self.exiting() {
            let candidacy = match blocking::start_shared(
                Arc::clone(&self.client),
                &role,
                &self.args.member,
                self.options.clone(),
            ) {
                // A candidacy right after the previous term ended waits for that term's exit.
                Ok(c) => c,
                Err(e) => {
                    self.journal
                        .log("CANDIDACY_FAILED", &[r(), ("error", e.to_string())]);
                    thread::sleep(Duration::from_millis(500));
                    continue;
                }
            };
            self.journal.log("CANDIDATE", &[r()]);
            let Some(leadership) = self.await_election(candidacy, &role) else {
                continue;
            };
            self.lead(&leadership, &role, index);
        }
    }

    /// Waits until elected; `None` when the candidacy failed or the process is exiting.
    fn await_election(&self, mut candidacy: Candidacy, role: &str) -> Option<Leadership> {
        let mut told_standby = false;
        loop {
            match candidacy.elected_blocking_timeout(Duration::from_millis(100)) {
                Ok(Ok(l)) => return Some(l),
                Ok(Err(e)) => {
                    self.journal.log(
                        "CANDIDACY_FAILED",
                        &[("role", role.to_owned()), ("error", e.to_string())],
                    );
                    thread::sleep(Duration::from_millis(500));
                    return None;
                }
                Err(c) => {
                    if self.exiting() {
                        let _ = c.resign_blocking();
                        return None;
                    }
                    let s = c.snapshot();
                    if let (false, Status::Standby, Some(rank)) = (told_standby, s.status, s.rank) {
                        told_standby = true;
                        self.journal.log(
                            "STANDBY",
                            &[("role", role.to_owned()), ("rank", rank.to_string())],
                        );
                    }
                    candidacy = c;
                }
            }
        }
    }

    /// Leads until the term ends or a resign is asked for; guarded writes all along.
    fn lead(&self, leadership: &Leadership, role: &str, partition: usize) {
        let pair = Pair::from(leadership.token());
        let term = leadership.term();
        let fields = |extra: &[(&'static str, String)]| {
            let mut f = vec![
                ("role", role.to_owned()),
                ("instance", self.args.instance.to_string()),
                ("pair", pair.to_string()),
                ("term", term.to_string()),
            ];
            f.extend_from_slice(extra);
            f
        };
        self.journal.log("ELECTED", &fields(&[]));
        let mut writer = self
            .args
            .postgres
            .as_ref()
            .map(|(url, tables)| Writer::new(url, tables, self.args.lease.as_millis() as u64));
        loop {
            if leadership.is_done() {
                let why = leadership
                    .err()
                    .map_or_else(|| "ended".to_owned(), |e| e.to_string());
                self.journal.log("ENDED", &fields(&[("error", why)]));
                return;
            }
            if self.exiting() || self.resign_asked(role, pair) {
                self.journal.log("RESIGN", &fields(&[]));
                let result = leadership.resign_blocking();
                let result = result.map_or_else(|e| e.to_string(), |()| "ok".to_owned());
                self.journal.log("RESIGNED", &fields(&[("error", result)]));
                return;
            }
            let started = Instant::now();
            let seq = self.seq.fetch_add(1, Ordering::SeqCst) + 1;
            let tag = Tag {
                role: role.to_owned(),
                member: self.args.member.clone(),
                instance: self.args.instance,
                pair,
                term,
                seq,
            };
            if let Some(w) = writer.as_mut() {
                let outcome = w.write(leadership, self.args.instance, seq);
                let took = ("took_ms", started.elapsed().as_millis().to_string());
                let seq = ("seq", seq.to_string());
                match outcome {
                    Outcome::Acked => self.journal.log("PG_ACK", &fields(&[seq, took])),
                    Outcome::Refused(newer) => {
                        // A deposed term: no guarded write either (the broker would refuse
                        // it too); the term ends at its next renewal or write.
                        self.journal.log(
                            "PG_REFUSED",
                            &fields(&[seq, took, ("newer_term", newer.to_string())]),
                        );
                        leadership.done_blocking_timeout(self.args.write_every);
                        continue;
                    }
                    Outcome::Failed(e) => self
                        .journal
                        .log("PG_FAILED", &fields(&[seq, took, ("error", e)])),
                }
            }
            let (key, value) = (tag.key(), tag.value());
            let record = GuardedRecord {
                topic: &self.args.data_topic,
                partition: partition as i32,
                key: Some(key.as_bytes()),
                value: Some(value.as_bytes()),
                headers: &[],
            };
            let written = leadership.guarded_write_blocking(&[record]);
            let took = started.elapsed().as_millis().to_string();
            match written {
                Ok(offsets) => self.journal.log(
                    "ACK",
                    &fields(&[
                        ("partition", partition.to_string()),
                        ("offset", offsets.first().copied().unwrap_or(-1).to_string()),
                        ("seq", seq.to_string()),
                        ("took_ms", took),
                    ]),
                ),
                Err(e) => self.journal.log(
                    "WRITE_FAILED",
                    &fields(&[
                        ("seq", seq.to_string()),
                        ("took_ms", took),
                        ("error", e.to_string()),
                    ]),
                ),
            }
            if let Some(rest) = self.args.write_every.checked_sub(started.elapsed()) {
                leadership.done_blocking_timeout(rest);
            }
        }
    }
}
