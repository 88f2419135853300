//! The `prometheus` example's service, scraped over HTTP: `/metrics` in Prometheus text and
//! `/healthz`, through an election, renewals, a frozen leader (renew failures, 503), the
//! takeover and the old leader's fence, and a resign.
//!
//! The members run in virtual time (a manual clock that only this test moves, with exact
//! quiescence after each move), so every value below is exact on any machine; the HTTP
//! listener answers in real time, from the state the drivers settled in.
#![cfg(feature = "prometheus")]

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use kafka_coordination::memory::MemoryBroker;
use kafka_coordination::Options;
use kafka_coordination_examples::args::Failure;
use kafka_coordination_examples::prometheus::{self, Service};
use kafka_coordination_examples::{Time, Timeline};

/// One HTTP exchange: the status code and the body.
fn request(addr: SocketAddr, method: &str, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).expect("connect to the example's listener");
    // A hang guard, never a verdict.
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no header end in {response:?}"));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {head:?}"));
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .and_then(|l| l.parse().ok())
        .unwrap_or_else(|| panic!("no Content-Length in {head:?}"));
    assert_eq!(length, body.len(), "Content-Length");
    (status, body.to_owned())
}

/// A scrape of `/metrics`: every sample by name and labels, looked at for one role.
struct Scrape {
    role: String,
    text: String,
    samples: Vec<(String, BTreeMap<String, String>, f64)>,
}

impl Scrape {
    /// A scrape for role `scheduler`.
    fn take(addr: SocketAddr) -> Scrape {
        Scrape::of_role(addr, "scheduler")
    }

    fn of_role(addr: SocketAddr, role: &str) -> Scrape {
        let (status, text) = request(addr, "GET", "/metrics");
        assert_eq!(status, 200, "{text}");
        let samples = text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .map(|line| parse_sample(line).unwrap_or_else(|| panic!("bad sample line {line:?}")))
            .collect();
        Scrape {
            role: role.to_owned(),
            text,
            samples,
        }
    }

    /// The samples named `name` whose labels include `labels`.
    fn find(&self, name: &str, labels: &[(&str, &str)]) -> Vec<f64> {
        self.samples
            .iter()
            .filter(|(n, l, _)| {
                n == name
                    && labels
                        .iter()
                        .all(|(k, v)| l.get(*k).map(String::as_str) == Some(v))
            })
            .map(|(_, _, v)| *v)
            .collect()
    }

    /// The one sample of `name` for `member` of the role; 0 when the series does not exist (a
    /// counter never incremented is not registered).
    fn member(&self, name: &str, member: &str) -> f64 {
        self.member_with(name, member, &[])
    }

    fn member_with(&self, name: &str, member: &str, more: &[(&str, &str)]) -> f64 {
        let mut labels = vec![("role", self.role.as_str()), ("member", member)];
        labels.extend_from_slice(more);
        match self.find(name, &labels)[..] {
            [] => 0.0,
            [v] => v,
            ref many => panic!("{name} {labels:?}: {many:?} in\n{}", self.text),
        }
    }

    /// The members with an `is_leader` series, and the sum of the series.
    fn leaders(&self) -> (usize, f64) {
        let series = self.find("kafka_coordination_is_leader", &[("role", &self.role)]);
        (series.len(), series.iter().sum())
    }
}

/// `name{k="v",...} value` (label values without escapes, which ours never need).
fn parse_sample(line: &str) -> Option<(String, BTreeMap<String, String>, f64)> {
    let (series, value) = line.rsplit_once(' ')?;
    let value: f64 = value.parse().ok()?;
    let (name, labels) = match series.split_once('{') {
        None => (series, BTreeMap::new()),
        Some((name, rest)) => {
            let body = rest.strip_suffix('}')?;
            let mut labels = BTreeMap::new();
            for pair in body.split("\",").filter(|p| !p.is_empty()) {
                let (k, v) = pair.split_once("=\"")?;
                labels.insert(k.to_owned(), v.trim_end_matches('"').to_owned());
            }
            (name, labels)
        }
    };
    Some((name.to_owned(), labels, value))
}

fn wait_leader<T>(
    time: &Time,
    svc: &mut Service<T>,
    not: Option<&str>,
    within: Duration,
    out: &Timeline,
) -> (usize, String)
where
    T: kafka_coordination::transport::Transport + Send + Sync + 'static,
{
    time.wait_for("a leader", within, || {
        svc.poll()?;
        Ok(svc
            .leader()
            .filter(|(_, name)| Some(*name) != not)
            .map(|(i, name)| (i, name.to_owned())))
    })
    .unwrap_or_else(|e| {
        panic!(
            "{e}\n--- members ---\n{}--- timeline ---\n{}",
            svc.status(),
            out.contents()
        )
    })
}

#[test]
fn metrics_and_health_over_http_through_a_failover() {
    // 50 ms steps: every renewal, retry and challenge instant below is reached exactly.
    let time = Time::virtual_time(Duration::from_millis(50));
    let broker = MemoryBroker::new(16, time.clock());
    let options = time.options(
        Options::new()
            .lease_duration(Duration::from_secs(3))
            .renew_interval(Duration::from_secs(1))
            .challenge_stagger(Duration::from_millis(500)),
    );
    let out = Timeline::buffer();
    let mut svc = Service::start(
        "scheduler",
        3,
        options,
        Duration::from_secs(2),
        "127.0.0.1:0",
        |name| Ok(broker.transport(name)),
        &out,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let addr = svc.addr();

    // 1. One leader; every member has an is_leader series.
    let (first_i, first) = wait_leader(&time, &mut svc, None, Duration::from_secs(1), &out);
    let elected_at = time.now();
    let s = Scrape::take(addr);
    assert_eq!(s.leaders(), (3, 1.0), "{}", s.text);
    assert_eq!(s.member("kafka_coordination_is_leader", &first), 1.0);
    assert_eq!(s.member("kafka_coordination_elections_total", &first), 1.0);
    // Minted and claimed without the clock moving: one acquire in the lowest bucket.
    let acquire = |s: &Scrape, le: &str| {
        s.member_with(
            "kafka_coordination_acquire_seconds_bucket",
            &first,
            &[("le", le)],
        )
    };
    assert_eq!(acquire(&s, "0.001"), 1.0);
    assert_eq!(
        s.member("kafka_coordination_acquire_seconds_count", &first),
        1.0
    );
    assert!(s
        .text
        .contains("# TYPE kafka_coordination_acquire_seconds histogram"));
    assert!(s.text.contains("# HELP kafka_coordination_is_leader "));
    assert_eq!(request(addr, "GET", "/healthz"), (200, "ok\n".to_owned()));

    // 2. Two renewals.
    time.sleep(Duration::from_secs(2)).unwrap();
    let s = Scrape::take(addr);
    assert_eq!(
        s.member("kafka_coordination_renew_seconds_count", &first),
        2.0
    );
    assert_eq!(
        s.member("kafka_coordination_renew_failures_total", &first),
        0.0
    );
    assert_eq!(request(addr, "GET", "/healthz").0, 200);

    // 3. The leader freezes at +2 s: its renewals fail at +3, +3.1, +3.3, +3.55, +3.8, +4.05 s
    //    (retries 100, 200, 250, 250, ... ms apart), and at +4.05 s its last renewal (+2 s) is
    //    older than the check's 2 s.
    svc.freeze(first_i);
    time.sleep(Duration::from_millis(2000)).unwrap();
    assert_eq!(
        request(addr, "GET", "/healthz").0,
        200,
        "exactly 2 s is fine"
    );
    time.sleep(Duration::from_millis(50)).unwrap();
    let (status, body) = request(addr, "GET", "/healthz");
    assert_eq!(status, 503, "{body}");
    assert!(
        body.contains(&format!("role `scheduler` (member `{first}`)"))
            && body.contains("last lease renewal 2.050 s ago")
            && body.contains("renewals failing for 1.050 s"),
        "{body}"
    );
    let s = Scrape::take(addr);
    assert_eq!(
        s.member("kafka_coordination_renew_failures_total", &first),
        6.0
    );
    assert_eq!(
        s.member("kafka_coordination_is_leader", &first),
        1.0,
        "it does not know"
    );

    // 4. The first standby takes over at the frozen leader's deadline, +5 s.
    let (_, second) = wait_leader(&time, &mut svc, Some(&first), Duration::from_secs(2), &out);
    assert_eq!(
        time.now(),
        elected_at.saturating_add(Duration::from_secs(5))
    );
    let s = Scrape::take(addr);
    assert_eq!(
        s.leaders(),
        (3, 2.0),
        "both believe they lead until the fence"
    );
    svc.thaw(first_i);
    // Its next retry meets the fence; it rejoins at the tail.
    time.wait_for("the old leader's fence", Duration::from_secs(1), || {
        svc.poll()?;
        Ok(Scrape::take(addr)
            .member("kafka_coordination_fenced_total", &first)
            .eq(&1.0)
            .then_some(()))
    })
    .unwrap_or_else(|e| panic!("{e}"));
    svc.poll().unwrap();
    let s = Scrape::take(addr);
    assert_eq!(s.leaders(), (3, 1.0), "{}", s.text);
    assert_eq!(s.member("kafka_coordination_is_leader", &first), 0.0);
    assert_eq!(s.member("kafka_coordination_is_leader", &second), 1.0);
    assert_eq!(s.member("kafka_coordination_elections_total", &second), 1.0);
    let ends = |s: &Scrape, member: &str, reason: &str| {
        s.member_with(
            "kafka_coordination_candidacy_ends_total",
            member,
            &[("reason", reason)],
        )
    };
    assert_eq!(ends(&s, &first, "fenced"), 1.0);
    assert_eq!(request(addr, "GET", "/healthz"), (200, "ok\n".to_owned()));
    assert!(out.contents().contains("rejoined at the tail"));

    // 5. The second leader resigns: the third member takes over at once.
    assert_eq!(svc.resign_leader().unwrap(), Some(second.clone()));
    let (_, third) = wait_leader(&time, &mut svc, Some(&second), Duration::ZERO, &out);
    assert!(third != first && third != second);
    let s = Scrape::take(addr);
    assert_eq!(s.leaders(), (3, 1.0));
    assert_eq!(s.member("kafka_coordination_resigns_total", &second), 1.0);
    assert_eq!(s.member("kafka_coordination_is_leader", &second), 0.0);
    assert_eq!(ends(&s, &second, "resigned"), 1.0);
    assert_eq!(s.member("kafka_coordination_elections_total", &third), 1.0);
    assert_eq!(s.member("kafka_coordination_fenced_total", &second), 0.0);

    // 6. Anything else is refused.
    assert_eq!(request(addr, "GET", "/nope").0, 404);
    assert_eq!(request(addr, "POST", "/metrics").0, 405);
    svc.stop();
}

#[test]
fn bad_arguments_are_refused_with_the_usage() {
    let out = Timeline::buffer();
    let args = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    for bad in [
        &["--members", "1"][..],
        &["--lease-ms", "1000", "--renew-ms", "1000"],
        &["--serve-ms", "0"],
        &["--nope"],
    ] {
        match prometheus::run(&args(bad), &out) {
            Err(Failure::Usage(_)) => {}
            other => panic!("{bad:?}: {other:?}"),
        }
    }
    prometheus::run(&args(&["--help"]), &out).unwrap();
    assert!(out.contents().contains("/healthz"));
    #[cfg(not(feature = "kafka"))]
    assert!(matches!(
        prometheus::run(&args(&["--bootstrap", "127.0.0.1:9092"]), &out),
        Err(Failure::Usage(m)) if m.contains("--features kafka")
    ));
}

/// The service on a real cluster: set `KAFKA_BOOTSTRAP` (for example with
/// `scripts/kafka/with-broker.sh cargo test -p kafka-coordination-examples --features kafka`).
/// Real time: every wait is a condition with a generous limit, never a fixed sleep.
///
/// The members start together, so on a fresh broker a known blind spot (a member that
/// registers just after an election, before the new lease is readable, challenges at once)
/// can depose the first leader; the test waits for a settled leader instead of assuming who it is.
#[cfg(feature = "kafka")]
#[test]
fn metrics_and_health_over_http_on_kafka() {
    use kafka_coordination::kafka::{KafkaConfig, KafkaTransport};
    let bootstrap = match std::env::var("KAFKA_BOOTSTRAP") {
        Ok(b) if !b.trim().is_empty() => b,
        _ => {
            let _ = writeln!(
                std::io::stderr(),
                "\n*** SKIPPED metrics_and_health_over_http_on_kafka: KAFKA_BOOTSTRAP is not set ***\n"
            );
            return;
        }
    };
    let kafka = |client: &str| -> Result<KafkaTransport, Failure> {
        let c = KafkaConfig::new(bootstrap.as_str(), 16)
            .with_client_id(format!("prometheus-test-{client}"));
        KafkaTransport::new(c).map_err(|e| Failure::Failed(format!("Kafka transport: {e}")))
    };
    let replication = std::env::var("KAFKA_BROKERS")
        .ok()
        .and_then(|n| n.parse::<i32>().ok())
        .map_or(1, |n| n.clamp(1, 3));
    kafka("admin")
        .unwrap_or_else(|e| panic!("{e}"))
        .create_topic(replication, (replication > 1).then_some(2))
        .unwrap_or_else(|e| panic!("the state topic: {e}"));
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let role = format!("prometheus-test-{nanos:x}");
    // A lease long enough that a loaded machine does not lose it by accident.
    let options = Options::new()
        .lease_duration(Duration::from_secs(10))
        .renew_interval(Duration::from_secs(1))
        .challenge_stagger(Duration::from_millis(500));
    let out = Timeline::buffer();
    let mut svc = Service::start(
        &role,
        2,
        options,
        Duration::from_secs(8),
        "127.0.0.1:0",
        kafka,
        &out,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let addr = svc.addr();
    let time = Time::real();
    let within = Duration::from_secs(120);

    // A settled leader: the only member whose is_leader is 1, the one the service sees
    // leading, and it has renewed.
    let settled = |svc: &mut Service<KafkaTransport>, what: &str| -> String {
        let mut last = String::new();
        let found = time.wait_for(what, within, || {
            svc.poll()?;
            let s = Scrape::of_role(addr, &role);
            let leader = svc.leader().map(|(_, name)| name.to_owned());
            let ok = leader.filter(|l| {
                s.leaders() == (2, 1.0)
                    && s.member("kafka_coordination_is_leader", l) == 1.0
                    && s.member("kafka_coordination_renew_seconds_count", l) >= 1.0
            });
            last = s.text;
            Ok(ok)
        });
        found.unwrap_or_else(|e| {
            panic!(
                "{e}\n--- last scrape ---\n{last}\n--- members ---\n{}--- timeline ---\n{}",
                svc.status(),
                out.contents()
            )
        })
    };
    let first = settled(&mut svc, "a settled leader");
    let s = Scrape::of_role(addr, &role);
    assert!(s.member("kafka_coordination_elections_total", &first) >= 1.0);
    assert!(s.member("kafka_coordination_acquire_seconds_count", &first) >= 1.0);
    assert!(s.text.contains("kafka_coordination_renew_seconds_bucket{"));
    time.wait_for("a healthy /healthz", within, || {
        Ok((request(addr, "GET", "/healthz") == (200, "ok\n".to_owned())).then_some(()))
    })
    .unwrap_or_else(|e| panic!("{e}: {:?}", request(addr, "GET", "/healthz")));

    // The settled leader resigns: one more resign, its series drops to 0 (until it may win
    // again later), and another settled leader follows.
    let resigns = s.member("kafka_coordination_resigns_total", &first);
    assert_eq!(svc.resign_leader().unwrap(), Some(first.clone()));
    let s = Scrape::of_role(addr, &role);
    assert_eq!(
        s.member("kafka_coordination_resigns_total", &first),
        resigns + 1.0
    );
    assert_eq!(s.member("kafka_coordination_is_leader", &first), 0.0);
    assert!(
        s.member_with(
            "kafka_coordination_candidacy_ends_total",
            &first,
            &[("reason", "resigned")]
        ) >= 1.0
    );
    settled(&mut svc, "a settled leader after the resign");
    let s = Scrape::of_role(addr, &role);
    let elections: f64 = s
        .find("kafka_coordination_elections_total", &[("role", &role)])
        .iter()
        .sum();
    assert!(elections >= 2.0, "{}", s.text);
    svc.stop();
}
