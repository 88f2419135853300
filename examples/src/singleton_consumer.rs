//! A singleton consumer with exactly-once output: one member of a role consumes an input topic
//! with rdkafka and writes each result **with the input's next offset** in one guarded
//! transaction ([`Leadership::guarded_write_with_offsets_blocking`]). A deposed leader's
//! transaction is refused as a whole, so its successor resumes exactly where the last committed
//! transaction ended: no output is lost or written twice.
//!
//! [`member`] is one process of the service; [`exactly_once`] feeds an input topic, runs
//! members as child processes, SIGKILLs and SIGSTOPs the consuming leader while standbys take
//! over, and checks the output with an independent read_committed consumer.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kafka_coordination::kafka::{KafkaConfig, KafkaTransport};
use kafka_coordination::leadership::Leadership;
use kafka_coordination::transport::{ConsumedOffset, GroupOffsets};
use kafka_coordination::{blocking, Error, GuardedRecord, Options, SystemClock};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{Headers, Message};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

use crate::args::Failure;

/// The input's partitions (and the output's: result of input partition p goes to partition p).
pub const PARTITIONS: i32 = 2;

/// What one member needs to know.
#[derive(Clone, Debug)]
pub struct Settings {
    /// `host:port` of a broker.
    pub bootstrap: String,
    /// The coordination state topic (one partition).
    pub state_topic: String,
    /// The role the members contest; also the transactional id.
    pub role: String,
    /// The consumer group whose committed offsets are the input position.
    pub group: String,
    /// The input topic ([`PARTITIONS`] partitions).
    pub input: String,
    /// The output topic ([`PARTITIONS`] partitions).
    pub output: String,
    /// At most this many input records per transaction.
    pub batch: usize,
    /// A pause after each transaction (a throttle, so a test can stop a leader mid-stream).
    pub pause: Duration,
}

impl Settings {
    /// The settings as `--name value` arguments (what [`Settings::parse`] reads).
    pub fn to_args(&self) -> Vec<String> {
        [
            ("--bootstrap", self.bootstrap.clone()),
            ("--state-topic", self.state_topic.clone()),
            ("--role", self.role.clone()),
            ("--group", self.group.clone()),
            ("--input", self.input.clone()),
            ("--output", self.output.clone()),
            ("--batch", self.batch.to_string()),
            ("--pause-ms", self.pause.as_millis().to_string()),
        ]
        .into_iter()
        .flat_map(|(k, v)| [k.to_owned(), v])
        .collect()
    }

    /// Reads `--name value` arguments; names not given keep `defaults`' values.
    pub fn parse(args: &[String], defaults: Settings) -> Result<Settings, Failure> {
        let mut s = defaults;
        let mut it = args.iter();
        while let Some(name) = it.next() {
            let value = it
                .next()
                .ok_or_else(|| Failure::Usage(format!("{name} needs a value")))?
                .clone();
            let number = |v: &str| {
                v.parse::<u64>()
                    .map_err(|_| Failure::Usage(format!("{name}: not a number: {v}")))
            };
            match name.as_str() {
                "--bootstrap" => s.bootstrap = value,
                "--state-topic" => s.state_topic = value,
                "--role" => s.role = value,
                "--group" => s.group = value,
                "--input" => s.input = value,
                "--output" => s.output = value,
                "--batch" => s.batch = number(&value)?.max(1) as usize,
                "--pause-ms" => s.pause = Duration::from_millis(number(&value)?),
                "--member" | "--records" | "--kills" | "--stops" | "--members" => {}
                other => return Err(Failure::Usage(format!("unknown argument {other}"))),
            }
        }
        Ok(s)
    }

    /// Settings with names unique to this run (`prefix` and the time).
    pub fn fresh(bootstrap: &str, prefix: &str) -> Settings {
        let stamp = format!("{}-{}", std::process::id(), now_ms() % 100_000_000);
        Settings {
            bootstrap: bootstrap.to_owned(),
            state_topic: format!("{prefix}-state-{stamp}"),
            role: format!("{prefix}-role-{stamp}"),
            group: format!("{prefix}-group-{stamp}"),
            input: format!("{prefix}-in-{stamp}"),
            output: format!("{prefix}-out-{stamp}"),
            batch: 20,
            pause: Duration::from_millis(40),
        }
    }

    fn client(&self) -> Result<KafkaTransport, String> {
        KafkaTransport::connect(KafkaConfig::new(&self.bootstrap, 1).with_topic(&self.state_topic))
            .map_err(|e| format!("the Kafka client: {e}"))
    }

    fn inputs(&self) -> Vec<(&str, i32)> {
        (0..PARTITIONS).map(|p| (self.input.as_str(), p)).collect()
    }
}

#[allow(non_snake_case)]
fn now_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

/// One record header: name, value.
type Header<'a> = (&'a str, Option<&'a [u8]>);

/// Short leases, as the other real-broker tests use.
fn options() -> Options {
    Options::new()
        .lease_duration(Duration::from_secs(2))
        .renew_interval(Duration::from_millis(500))
        .challenge_stagger(Duration::from_millis(500))
        .clock(SystemClock)
}

/// Prints one event line for a supervisor (`@@ <event> <member> ...`).
fn event(line: std::fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "@@ {line}");
    let _ = out.flush();
}

/// One member process: campaigns for the role; while leading, consumes the input from the
/// group's committed offsets and writes each result with the input's next offset in one
/// guarded transaction; when the term ends, stops consuming and campaigns again. Runs until
/// killed.
pub fn member(settings: &Settings, name: &str) -> Result<(), Failure> {
    let client = Arc::new(settings.client()?);
    loop {
        let leadership =
            match blocking::acquire_leadership(client.clone(), &settings.role, name, options()) {
                Ok(l) => l,
                Err(e) => {
                    event(format_args!("error {name} campaign: {e}"));
                    std::thread::sleep(Duration::from_millis(200));
                    continue;
                }
            };
        event(format_args!("elected {name} {}", leadership.token()));
        match lead(settings, &client, &leadership, name) {
            Ok(()) => event(format_args!("ended {name}")),
            Err(e) => event(format_args!("ended {name} {e}")),
        }
        // Whatever ended the term (a fence, a failure), the role is left and contested again.
        let _ = leadership.resign_blocking();
    }
}

/// The core of the example: one term of consuming.
fn lead(
    s: &Settings,
    client: &KafkaTransport,
    leadership: &Leadership,
    name: &str,
) -> Result<(), String> {
    // Where the last committed transaction left the group (the previous leader's open
    // transaction, if any, was aborted by this election).
    let inputs = s.inputs();
    let committed = client
        .committed_offsets(&s.group, &inputs)
        .map_err(|e| format!("reading the committed offsets: {e}"))?;
    let mut assignment = TopicPartitionList::new();
    for ((topic, p), at) in inputs.iter().zip(&committed) {
        let at = at.map_or(Offset::Beginning, Offset::Offset);
        assignment
            .add_partition_offset(topic, *p, at)
            .map_err(|e| e.to_string())?;
    }
    event(format_args!("resumed {name} {committed:?}"));
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &s.bootstrap)
        .set("group.id", &s.group)
        .set("isolation.level", "read_committed")
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .create()
        .map_err(|e| format!("the consumer: {e}"))?;
    consumer.assign(&assignment).map_err(|e| e.to_string())?;
    while !leadership.is_done() {
        // Up to a batch of input records: one transaction.
        let mut batch = Vec::new();
        let mut wait = Duration::from_millis(100);
        while batch.len() < s.batch {
            match consumer.poll(wait) {
                Some(Ok(m)) => batch.push((
                    m.partition(),
                    m.offset(),
                    m.key().map(<[u8]>::to_vec),
                    m.payload().unwrap_or_default().to_vec(),
                )),
                Some(Err(e)) => return Err(format!("consuming: {e}")),
                None => break,
            }
            wait = Duration::ZERO;
        }
        if batch.is_empty() || leadership.is_done() {
            continue;
        }
        let offsets_text: Vec<String> = batch.iter().map(|b| b.1.to_string()).collect();
        let values: Vec<Vec<u8>> = batch
            .iter()
            .map(|b| [b"processed:".as_slice(), &b.3].concat())
            .collect();
        let headers: Vec<[Header<'_>; 1]> = offsets_text
            .iter()
            .map(|o| [("input-offset", Some(o.as_bytes()))])
            .collect();
        let records: Vec<GuardedRecord<'_>> = batch
            .iter()
            .zip(&values)
            .zip(&headers)
            .map(|((b, v), h)| {
                GuardedRecord::new(&s.output, b.0, b.2.as_deref(), Some(v)).with_headers(h)
            })
            .collect();
        let mut next: BTreeMap<i32, i64> = BTreeMap::new();
        for b in &batch {
            next.insert(b.0, b.1 + 1);
        }
        let consumed: Vec<ConsumedOffset<'_>> = next
            .iter()
            .map(|(&partition, &next_offset)| ConsumedOffset {
                topic: &s.input,
                partition,
                next_offset,
                metadata: None,
            })
            .collect();
        let offsets = GroupOffsets {
            group: &s.group,
            offsets: &consumed,
        };
        match leadership.guarded_write_with_offsets_blocking(&records, offsets) {
            Ok(_) => event(format_args!("progress {name} {}", batch.len())),
            // Deposed: stop consuming at once; nothing of this batch is visible.
            Err(Error::Fenced { .. }) => return Err("fenced".into()),
            // Outcome unknown or failed: leave the term, so that the next leader (maybe this
            // process again) starts from what is really committed.
            Err(e) => return Err(format!("write failed: {e}")),
        }
        std::thread::sleep(s.pause);
    }
    Ok(())
}

/// What [`exactly_once`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Input records fed.
    pub records: u64,
    /// Leaders SIGKILLed.
    pub kills: u32,
    /// Leaders SIGSTOPped (and resumed after a successor was elected).
    pub stops: u32,
    /// Elections seen (the first one included).
    pub elections: u32,
    /// Terms that ended with a refused (fenced) write: a deposed leader's transaction, records
    /// and offsets, refused as a whole.
    pub fenced_writes: u32,
    /// Input records whose result appears more than once (extra copies counted).
    pub duplicates: u64,
    /// Input records whose result is missing.
    pub gaps: u64,
    /// Results out of input order within a partition.
    pub out_of_order: u64,
    /// The group's committed offsets at the end, per input partition.
    pub committed: Vec<Option<i64>>,
    /// Results per output partition.
    pub results: Vec<u64>,
    /// Wall time of the run.
    pub elapsed: Duration,
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "N={} failovers={} (kills={} stops={}) elections={} fenced_writes={} duplicates={} \
             gaps={} out_of_order={} committed={:?} results={:?} elapsed={:.1}s",
            self.records,
            self.kills + self.stops,
            self.kills,
            self.stops,
            self.elections,
            self.fenced_writes,
            self.duplicates,
            self.gaps,
            self.out_of_order,
            self.committed,
            self.results,
            self.elapsed.as_secs_f64()
        )
    }
}

/// A member child process and what it printed.
struct Member {
    name: String,
    child: Child,
}

/// The event lines of every child, in arrival order: (member, words).
type Events = Arc<Mutex<Vec<(String, Vec<String>)>>>;

/// Feeds `records` input records, runs `members` member processes (`spawn` makes the command
/// of one, given its name), SIGKILLs the consuming leader `kills` times and SIGSTOPs it `stops`
/// times (each once it made progress; a stopped one is resumed once a successor is elected,
/// and a killed one replaced), waits until the group's committed offsets cover the input, and
/// checks the output with an independent read_committed consumer.
pub fn exactly_once(
    s: &Settings,
    records: u64,
    members: usize,
    kills: u32,
    stops: u32,
    spawn: &dyn Fn(&str) -> Command,
) -> Result<Report, Failure> {
    let started = Instant::now();
    create_topics(s)?;
    feed(s, records)?;
    let events: Events = Arc::default();
    let mut running: Vec<Member> = Vec::new();
    let mut next_id = 0;
    let mut start_member = |running: &mut Vec<Member>| -> Result<(), Failure> {
        next_id += 1;
        let name = format!("member-{next_id}");
        let mut child = spawn(&name)
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("starting {name}: {e}"))?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let (events, who) = (Arc::clone(&events), name.clone());
        std::thread::spawn(move || {
            let echo = std::env::var_os("SINGLETON_CONSUMER_ECHO").is_some();
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if echo {
                    eprintln!("[{who}] {line}");
                }
                // A test harness may print its own words before the first event on a line.
                if let Some(rest) = line.find("@@ ").map(|at| &line[at + 3..]) {
                    let words: Vec<String> = rest.split_whitespace().map(str::to_owned).collect();
                    events
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push((who.clone(), words));
                }
            }
        });
        running.push(Member { name, child });
        Ok(())
    };
    for _ in 0..members {
        start_member(&mut running)?;
    }
    let result = (|| -> Result<Report, Failure> {
        let mut report = Report {
            records,
            ..Report::default()
        };
        // Kill, stop, kill, stop, ... while each kind lasts.
        let (mut k, mut st, mut plan) = (kills, stops, Vec::new());
        while k + st > 0 {
            if k > 0 && (plan.len() % 2 == 0 || st == 0) {
                k -= 1;
                plan.push(true);
            } else {
                st -= 1;
                plan.push(false);
            }
        }
        let min_progress = (records / u64::from(kills + stops + 2)).clamp(1, 200);
        for kill in plan {
            let (leader, seen) = wait_for_leader_progress(&events, min_progress, None)?;
            let index = running
                .iter()
                .position(|m| m.name == leader)
                .ok_or_else(|| format!("{leader} is not running"))?;
            let pid = running[index].child.id().to_string();
            if kill {
                signal("-KILL", &pid)?;
                let mut dead = running.remove(index);
                let _ = dead.child.wait();
                report.kills += 1;
                start_member(&mut running)?;
                wait_for_leader_progress(&events, 0, Some((&leader, seen)))?;
            } else {
                signal("-STOP", &pid)?;
                report.stops += 1;
                let waited = wait_for_leader_progress(&events, 0, Some((&leader, seen)));
                signal("-CONT", &pid)?;
                waited?;
            }
        }
        let client = s.client()?;
        let deadline = Instant::now() + Duration::from_secs(120);
        let want = records_per_partition(records);
        loop {
            let committed = client
                .committed_offsets(&s.group, &s.inputs())
                .map_err(|e| format!("reading the committed offsets: {e}"))?;
            if committed
                .iter()
                .zip(&want)
                .all(|(c, w)| c.unwrap_or(0) >= *w)
            {
                report.committed = committed;
                break;
            }
            if Instant::now() > deadline {
                return Err(format!("the input was not consumed in time: {committed:?}").into());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        {
            let all = events.lock().unwrap_or_else(|e| e.into_inner());
            let count = |what: &[&str]| {
                all.iter()
                    .filter(|(_, w)| {
                        what.iter().enumerate().all(|(i, x)| {
                            w.get(if i == 0 { 0 } else { i + 1 }).map(String::as_str) == Some(*x)
                        })
                    })
                    .count() as u32
            };
            report.elections = count(&["elected"]);
            report.fenced_writes = count(&["ended", "fenced"]);
        }
        check_output(s, &want, &mut report)?;
        report.elapsed = started.elapsed();
        Ok(report)
    })();
    for mut m in running {
        let _ = m.child.kill();
        let _ = m.child.wait();
    }
    result
}

/// How many input records each partition gets (round robin).
fn records_per_partition(records: u64) -> Vec<i64> {
    (0..PARTITIONS as u64)
        .map(|p| ((records + PARTITIONS as u64 - 1 - p) / PARTITIONS as u64) as i64)
        .collect()
}

fn signal(which: &str, pid: &str) -> Result<(), Failure> {
    let status = Command::new("kill")
        .args([which, pid])
        .status()
        .map_err(|e| format!("kill {which} {pid}: {e}"))?;
    if !status.success() {
        return Err(format!("kill {which} {pid} failed").into());
    }
    Ok(())
}

/// Waits (up to 60 s) for a leader that made at least `min_progress` records of progress since
/// its election; with `after = (old, n)`, for an election of another member than `old` among
/// the events after the first `n`. Returns the leader and how many events there were then.
fn wait_for_leader_progress(
    events: &Events,
    min_progress: u64,
    after: Option<(&str, usize)>,
) -> Result<(String, usize), Failure> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        {
            let all = events.lock().unwrap_or_else(|e| e.into_inner());
            let from = after.map_or(0, |(_, n)| n);
            let elected = all
                .iter()
                .enumerate()
                .skip(from)
                .rev()
                .find(|(_, (who, w))| {
                    w.first().map(String::as_str) == Some("elected")
                        && after.is_none_or(|(old, _)| who != old)
                });
            if let Some((at, (leader, _))) = elected {
                let progress: u64 = all[at..]
                    .iter()
                    .filter(|(who, w)| {
                        who == leader && w.first().map(String::as_str) == Some("progress")
                    })
                    .filter_map(|(_, w)| w.get(2)?.parse::<u64>().ok())
                    .sum();
                if progress >= min_progress {
                    return Ok((leader.clone(), all.len()));
                }
            }
        }
        if Instant::now() > deadline {
            return Err("no leader made progress within 60 s".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn create_topics(s: &Settings) -> Result<(), Failure> {
    KafkaTransport::new(KafkaConfig::new(&s.bootstrap, 1).with_topic(&s.state_topic))
        .map_err(|e| format!("the Kafka client: {e}"))?
        .create_topic(1, None)
        .map_err(|e| format!("the state topic: {e}"))?;
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", &s.bootstrap)
        .create()
        .map_err(|e| format!("the admin client: {e}"))?;
    let topics = [
        NewTopic::new(&s.input, PARTITIONS, TopicReplication::Fixed(1)),
        NewTopic::new(&s.output, PARTITIONS, TopicReplication::Fixed(1)),
    ];
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let results = rt
        .block_on(admin.create_topics(&topics, &AdminOptions::new()))
        .map_err(|e| format!("creating topics: {e}"))?;
    for r in results {
        r.map_err(|(topic, e)| format!("creating {topic}: {e}"))?;
    }
    Ok(())
}

/// Writes `records` input records, round robin over the partitions, value `in-<p>-<i>`.
fn feed(s: &Settings, records: u64) -> Result<(), Failure> {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &s.bootstrap)
        .set("enable.idempotence", "true")
        .create()
        .map_err(|e| format!("the input producer: {e}"))?;
    for i in 0..records {
        let p = (i % PARTITIONS as u64) as i32;
        let value = format!("in-{p}-{}", i / PARTITIONS as u64);
        let key = i.to_string();
        loop {
            match producer.send(
                BaseRecord::to(&s.input)
                    .partition(p)
                    .key(&key)
                    .payload(&value),
            ) {
                Ok(()) => break,
                Err((e, _)) => {
                    producer.poll(Duration::from_millis(10));
                    if !matches!(e, KafkaError::MessageProduction(_)) {
                        return Err(format!("producing input: {e}").into());
                    }
                }
            }
        }
        producer.poll(Duration::ZERO);
    }
    producer
        .flush(Duration::from_secs(30))
        .map_err(|e| format!("flushing input: {e}"))?;
    Ok(())
}

/// Reads the whole output with read_committed and counts duplicates, gaps and disorder against
/// `want` records per partition; checks the group's offsets equal the output's progress.
fn check_output(s: &Settings, want: &[i64], report: &mut Report) -> Result<(), Failure> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &s.bootstrap)
        .set("group.id", format!("{}-checker", s.group))
        .set("isolation.level", "read_committed")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .create()
        .map_err(|e| format!("the checker: {e}"))?;
    let mut tpl = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        tpl.add_partition_offset(&s.output, p, Offset::Beginning)
            .map_err(|e| e.to_string())?;
    }
    consumer.assign(&tpl).map_err(|e| e.to_string())?;
    let mut seen: Vec<Vec<i64>> = vec![Vec::new(); PARTITIONS as usize];
    let mut at_end = vec![false; PARTITIONS as usize];
    let deadline = Instant::now() + Duration::from_secs(60);
    while at_end.iter().any(|e| !e) {
        if Instant::now() > deadline {
            return Err("the checker did not reach the output's end in 60 s".into());
        }
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(m)) => {
                let p = m.partition() as usize;
                at_end[p] = false;
                let from_header = m.headers().and_then(|h| {
                    h.iter()
                        .find(|h: &rdkafka::message::Header<'_, &[u8]>| h.key == "input-offset")
                        .and_then(|h| std::str::from_utf8(h.value?).ok()?.parse::<i64>().ok())
                });
                let value = String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned();
                let from_value = value.rsplit('-').next().and_then(|i| i.parse::<i64>().ok());
                if from_header.is_none() || from_header != from_value {
                    return Err(format!(
                        "output {p}@{}: header {from_header:?} disagrees with value {value}",
                        m.offset()
                    )
                    .into());
                }
                seen[p].extend(from_header);
            }
            Some(Err(KafkaError::PartitionEOF(p))) => at_end[p as usize] = true,
            Some(Err(e)) => return Err(format!("the checker: {e}").into()),
            None => {}
        }
    }
    for (p, offsets) in seen.iter().enumerate() {
        let t = tally(offsets, want[p]);
        report.duplicates += t.duplicates;
        report.gaps += t.gaps;
        report.out_of_order += t.out_of_order;
        let distinct = t.distinct;
        report.results.push(offsets.len() as u64);
        // The group's position is exactly the output's progress: no offset of a deposed
        // leader's refused transaction is visible.
        let committed = report.committed.get(p).copied().flatten().unwrap_or(0);
        if committed != distinct {
            return Err(format!(
                "partition {p}: the group's committed offset {committed} differs from the \
                 output's progress {distinct} ({report})"
            )
            .into());
        }
    }
    Ok(())
}

/// What the output of one partition holds, against the `want` inputs `0..want`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Tally {
    /// Extra copies of inputs already seen.
    duplicates: u64,
    /// Inputs in `0..want` never seen.
    gaps: u64,
    /// First copies that came after a later input's.
    out_of_order: u64,
    /// Distinct inputs seen.
    distinct: i64,
}

/// Tallies the input offsets of one output partition's results, in output order.
fn tally(offsets: &[i64], want: i64) -> Tally {
    let mut t = Tally::default();
    let mut distinct = std::collections::BTreeSet::new();
    let mut last = -1;
    for &o in offsets {
        if !distinct.insert(o) {
            t.duplicates += 1;
        } else if o < last {
            t.out_of_order += 1;
        }
        last = last.max(o);
    }
    t.gaps = (0..want).filter(|o| !distinct.contains(o)).count() as u64;
    t.distinct = distinct.len() as i64;
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The checker fails on what it is meant to catch: a result written twice (a deposed
    /// leader's output that became visible), a skipped input, and disorder.
    #[test]
    fn the_tally_counts_duplicates_gaps_and_disorder() {
        assert_eq!(
            tally(&[0, 1, 2, 3], 4),
            Tally {
                distinct: 4,
                ..Tally::default()
            }
        );
        let t = tally(&[0, 1, 2, 1, 2, 3], 4);
        assert_eq!((t.duplicates, t.gaps, t.out_of_order), (2, 0, 0));
        let t = tally(&[0, 2, 3], 4);
        assert_eq!((t.duplicates, t.gaps, t.distinct), (0, 1, 3));
        let t = tally(&[0, 2, 1, 3], 4);
        assert_eq!((t.duplicates, t.gaps, t.out_of_order), (0, 0, 1));
        assert_eq!(records_per_partition(2_001), [1_001, 1_000]);
    }
}
