//! A job scheduler that leads a role and records each job run twice: as a row in PostgreSQL,
//! written through the database fence ([`Fence::advance`] in the same transaction), and as a
//! record in Kafka, through a guarded write. A deposed scheduler (paused past its lease, cut
//! off) that wakes up and runs a job is refused by both: PostgreSQL rolls its transaction back,
//! the broker refuses its record.
//!
//! ```text
//! scripts/kafka/with-broker.sh scripts/postgres/with-postgres.sh \
//!     cargo run --example job_scheduler --features postgres -- --create-topics --runs 5
//! ```
//!
//! Run two or three copies (each with its own `--member`) against one broker and one database:
//! one schedules, the others stand by and take over. `--step` runs one job per line read on
//! stdin (`run NAME`; `exit` resigns), without first looking whether the term is over, so a
//! test can pause a leader and make it write after its successor: the fence alone refuses it.

use std::io::{BufRead, Write};
use std::sync::Arc;
use std::time::Duration;

use kafka_coordination::kafka::{KafkaConfig, KafkaTransport};
use kafka_coordination::leadership::Leadership;
use kafka_coordination::postgres::{Claim, Fence, FenceError};
use kafka_coordination::{blocking, GuardedRecord, Options};
use postgres::{Client, NoTls};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::ClientConfig;

use crate::args::{parse, Failure};
use crate::timeline::Timeline;

const USAGE: &str = "\
usage: job_scheduler [--bootstrap HOST:PORT ($KAFKA_BOOTSTRAP)] [--postgres URL ($KC_POSTGRES_URL)]
                     [--member NAME (job-<pid>)] [--role NAME (job-scheduler)]
                     [--state-topic NAME (__coordination_state)] [--partitions N (16)]
                     [--topic NAME (jobs)] [--fence-table NAME (coordination_fence)]
                     [--runs-table NAME (job_runs)] [--runs N (10)] [--every-ms N (1000)]
                     [--lease-ms N (30000)] [--renew-ms N (10000)] [--stagger-ms N (1000)]
                     [--create-topics] [--step]
Leads --role; while it leads, runs a job every --every-ms (--runs of them, then resigns), each
recorded in PostgreSQL through the fence and in Kafka through a guarded write.
--create-topics creates the state topic (one partition per --partitions) and --topic when missing.
--step: one job per stdin line `run NAME`, without looking whether the term is over; `exit` resigns.";

/// What one scheduler process needs to know.
#[derive(Clone, Debug)]
pub struct Settings {
    /// `host:port` of a broker.
    pub bootstrap: String,
    /// The PostgreSQL connection string.
    pub postgres: String,
    /// This process's member id.
    pub member: String,
    /// The role the schedulers contest.
    pub role: String,
    /// The coordination state topic and its partition count.
    pub state_topic: String,
    /// Partitions of the state topic.
    pub partitions: i32,
    /// The topic of job-run records (partition 0).
    pub topic: String,
    /// The fence table.
    pub fence_table: String,
    /// The table of job runs.
    pub runs_table: String,
    /// Jobs to run before resigning (not in step mode).
    pub runs: u64,
    /// Time between jobs.
    pub every: Duration,
    /// The lease's timing.
    pub options: Options,
    /// Create the topics when missing.
    pub create_topics: bool,
    /// One job per stdin line.
    pub step: bool,
}

impl Settings {
    /// Reads the command line (without the program name).
    pub fn parse(args: &[String]) -> Result<Settings, Failure> {
        let p = parse(
            args,
            &[
                "--bootstrap",
                "--postgres",
                "--member",
                "--role",
                "--state-topic",
                "--partitions",
                "--topic",
                "--fence-table",
                "--runs-table",
                "--runs",
                "--every-ms",
                "--lease-ms",
                "--renew-ms",
                "--stagger-ms",
            ],
            &["--create-topics", "--step"],
            USAGE,
        )?;
        if p.help() {
            return Err(Failure::Usage(USAGE.to_owned()));
        }
        let or_env = |flag: &str, var: &str| {
            p.value(flag)
                .map(str::to_owned)
                .or_else(|| std::env::var(var).ok())
                .filter(|v| !v.is_empty())
                .ok_or_else(|| Failure::Usage(format!("{flag} (or {var}) is required\n\n{USAGE}")))
        };
        let text = |flag: &str, default: &str| p.value(flag).unwrap_or(default).to_owned();
        let ms = |flag: &str, default: u64| p.positive(flag, default).map(Duration::from_millis);
        let options = Options::new()
            .lease_duration(ms("--lease-ms", 30_000)?)
            .renew_interval(ms("--renew-ms", 10_000)?)
            .challenge_stagger(ms("--stagger-ms", 1_000)?);
        let runs_table = text("--runs-table", "job_runs");
        // The job table is named in SQL text: the same rules as the fence table's.
        Fence::new(&runs_table).map_err(|e| Failure::Usage(format!("--runs-table: {e}")))?;
        Ok(Settings {
            bootstrap: or_env("--bootstrap", "KAFKA_BOOTSTRAP")?,
            postgres: or_env("--postgres", "KC_POSTGRES_URL")?,
            member: p
                .value("--member")
                .map_or_else(|| format!("job-{}", std::process::id()), str::to_owned),
            role: text("--role", "job-scheduler"),
            state_topic: text("--state-topic", "__coordination_state"),
            partitions: p.positive("--partitions", 16)? as i32,
            topic: text("--topic", "jobs"),
            fence_table: text("--fence-table", kafka_coordination::postgres::DEFAULT_TABLE),
            runs_table,
            runs: p.positive("--runs", 10)?,
            every: ms("--every-ms", 1_000)?,
            options,
            create_topics: p.switch("--create-topics"),
            step: p.switch("--step"),
        })
    }
}

/// The program: `cargo run --example job_scheduler --features postgres -- ...`.
pub fn run(args: &[String], _timeline: &Timeline) -> Result<(), Failure> {
    let settings = Settings::parse(args)?;
    scheduler(&settings)
}

/// Prints one event line and flushes it (a test reads them as they come).
fn say(line: String) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// Creates the state topic and the job topic when missing.
fn create_topics(s: &Settings) -> Result<(), Failure> {
    KafkaTransport::new(KafkaConfig::new(&s.bootstrap, s.partitions).with_topic(&s.state_topic))
        .map_err(|e| format!("the Kafka client: {e}"))?
        .create_topic(1, None)
        .map_err(|e| format!("the state topic: {e}"))?;
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", &s.bootstrap)
        .create()
        .map_err(|e| format!("the admin client: {e}"))?;
    let topic = NewTopic::new(&s.topic, 1, TopicReplication::Fixed(1));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let results = rt
        .block_on(admin.create_topics([&topic], &AdminOptions::new()))
        .map_err(|e| format!("creating {}: {e}", s.topic))?;
    for r in results {
        match r {
            Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((t, e)) => return Err(format!("creating {t}: {e}").into()),
        }
    }
    Ok(())
}

/// One scheduler process: migrate, lead, run jobs, resign.
pub fn scheduler(s: &Settings) -> Result<(), Failure> {
    let mut db = Client::connect(&s.postgres, NoTls)
        .map_err(|e| format!("connecting to PostgreSQL ({}): {e}", s.postgres))?;
    let fence = Fence::new(&s.fence_table).map_err(|e| Failure::Usage(e.to_string()))?;
    fence
        .migrate(&mut db)
        .map_err(|e| format!("migrating: {e}"))?;
    db.batch_execute(&format!(
        "CREATE TABLE IF NOT EXISTS {} (
             id     bigserial   PRIMARY KEY,
             job    text        NOT NULL,
             role   text        NOT NULL,
             term   bigint      NOT NULL,
             member text        NOT NULL,
             ran_at timestamptz NOT NULL DEFAULT now())",
        s.runs_table
    ))
    .map_err(|e| format!("creating {}: {e}", s.runs_table))?;
    if s.create_topics {
        create_topics(s)?;
    }
    let client = KafkaTransport::connect(
        KafkaConfig::new(&s.bootstrap, s.partitions).with_topic(&s.state_topic),
    )
    .map_err(|e| format!("the Kafka client: {e}"))?;
    say(format!("CANDIDATE member={} role={}", s.member, s.role));
    let leader =
        blocking::acquire_leadership(Arc::new(client), &s.role, &s.member, s.options.clone())
            .map_err(|e| format!("the candidacy: {e}"))?;
    say(format!(
        "ELECTED member={} term={} token={}",
        s.member,
        leader.term(),
        leader.token()
    ));
    let outcome = if s.step {
        step(s, &fence, &mut db, &leader)
    } else {
        every(s, &fence, &mut db, &leader)
    };
    if let Err(e) = &outcome {
        say(format!("STOPPED member={} error={e}", s.member));
        return outcome;
    }
    leader
        .resign_blocking()
        .map_err(|e| format!("resigning: {e}"))?;
    say(format!("RESIGNED member={}", s.member));
    Ok(())
}

/// The job loop: one job every `every` while the term lasts.
fn every(s: &Settings, fence: &Fence, db: &mut Client, leader: &Leadership) -> Result<(), Failure> {
    for n in 1..=s.runs {
        if leader.done_blocking_timeout(s.every) {
            return Err(format!("the term is over: {:?}", leader.err()).into());
        }
        run_job(s, fence, db, leader, &format!("job-{n}"))?;
    }
    Ok(())
}

/// Step mode: one job per `run NAME` line on stdin, until `exit` or the end of stdin.
fn step(s: &Settings, fence: &Fence, db: &mut Client, leader: &Leadership) -> Result<(), Failure> {
    for line in std::io::stdin().lock().lines() {
        let line = line.map_err(|e| format!("reading stdin: {e}"))?;
        match line.split_whitespace().collect::<Vec<_>>().as_slice() {
            ["run", job] => run_job(s, fence, db, leader, job)?,
            ["exit"] => break,
            _ => {
                return Err(Failure::Usage(format!(
                    "unknown command `{line}` (run NAME, exit)"
                )))
            }
        }
    }
    Ok(())
}

/// Runs one job: its row in PostgreSQL through the fence, then its record in Kafka.
fn run_job(
    s: &Settings,
    fence: &Fence,
    db: &mut Client,
    leader: &Leadership,
    job: &str,
) -> Result<(), Failure> {
    let claim = Claim::of(leader);
    let mut tx = db.transaction().map_err(|e| format!("BEGIN: {e}"))?;
    // First in the transaction: refused when a newer term already wrote.
    match fence.advance(&mut tx, &claim) {
        Ok(()) => {}
        Err(e @ FenceError::Fenced { .. }) => {
            // `tx` is dropped: rolled back.
            say(format!(
                "REFUSED member={} job={job} term={} by=postgres error={e}",
                s.member,
                claim.term()
            ));
            return Err(e.to_string().into());
        }
        Err(e) => return Err(format!("the fence: {e}").into()),
    }
    let id: i64 = tx
        .query_one(
            &format!(
                "INSERT INTO {} (job, role, term, member) VALUES ($1, $2, $3, $4) RETURNING id",
                s.runs_table
            ),
            &[&job, &claim.role(), &claim.term(), &claim.member()],
        )
        .map_err(|e| format!("recording {job}: {e}"))?
        .get(0);
    tx.commit().map_err(|e| format!("COMMIT of {job}: {e}"))?;
    let value = format!("{job} ran in term {} by {}", claim.term(), claim.member());
    let offsets = leader
        .guarded_write_blocking(&[GuardedRecord::new(
            &s.topic,
            0,
            Some(job.as_bytes()),
            Some(value.as_bytes()),
        )])
        .map_err(|e| {
            say(format!(
                "REFUSED member={} job={job} term={} by=kafka error={e}",
                s.member,
                claim.term()
            ));
            format!("the job record of {job}: {e}")
        })?;
    say(format!(
        "RAN member={} job={job} term={} row={id} offset={}",
        s.member,
        claim.term(),
        offsets.first().copied().unwrap_or(-1)
    ));
    Ok(())
}
