//! `cargo run --example prometheus`: members of one role, their metrics served as Prometheus
//! text on `/metrics` and a leader liveness check on `/healthz`, from one small HTTP listener.
//!
//! The library records its series through the `metrics` facade (feature `metrics`, see
//! `kafka_coordination::metrics`); this example installs `metrics-exporter-prometheus` as the
//! recorder (with buckets for the `_seconds` histograms) and renders it on each scrape. The
//! [`HealthCheck`] answers `/healthz`: 200 while the process leads nothing or every term it
//! leads renewed its lease recently, 503 with the stale terms otherwise.
//!
//! Several members share one process here so that one scrape shows a leader and its standbys
//! (in production: one member per process, each with its own `/metrics`). Every `--rotate-ms`
//! the story moves on, alternating between
//! * a **hand-over**: the leader resigns, the next member takes over at once, the old leader
//!   rejoins at the tail (`resigns_total`, `elections_total`, `acquire_seconds`);
//! * a **freeze**: the leader's link is cut, so its renewals fail (`renew_failures_total`,
//!   `/healthz` turns 503), a standby takes over at the lease deadline, the link comes back,
//!   the old leader's next renewal meets the fence (`fenced_total`) and it rejoins.
//!
//! ```text
//! cargo run --example prometheus -- --listen 127.0.0.1:9464
//! curl -s localhost:9464/metrics | grep kafka_coordination_is_leader
//! curl -si localhost:9464/healthz
//! ```
//!
//! The HTTP listener is a few lines of `std::net` (GET only, one request per connection): the
//! point is the wiring, not the server. A service would mount the same two handlers in its own
//! framework: `handle.render()` and `check.check()`.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use kafka_coordination::cuttable_link::Link;
use kafka_coordination::leadership::{Candidacy, Leadership};
use kafka_coordination::transport::Transport;
use kafka_coordination::{blocking, HealthCheck, Options, SystemClock};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::args::{parse, Failure};
use crate::timeline::Timeline;

/// The command-line help.
pub const USAGE: &str = "\
usage: cargo run --example prometheus [--features kafka] -- [options]

Members of one role in this process; their metrics on /metrics (Prometheus text) and a
leader liveness check on /healthz (200, or 503 with the stale terms).
  --listen ADDR      where to serve HTTP (default 127.0.0.1:9464; port 0 picks a free one)
  --members N        members of the role (default 3)
  --lease-ms MS      lease duration (default 3000)
  --renew-ms MS      renew interval (default 1000)
  --max-age-ms MS    /healthz fails when a leader's last renewal is older (default 2 renew intervals)
  --rotate-ms MS     every MS, alternately: the leader resigns / the leader freezes until a
                     standby takes over (default 10000)
  --no-rotate        keep the first leader
  --serve-ms MS      stop after MS (default: serve until killed)
  --bootstrap H:P    run against a Kafka cluster instead of the embedded MemoryBroker
                     (needs the `kafka` feature; the topic is created if missing)";

/// The `_seconds` histograms' buckets, in seconds: a renewal is a transactional write of a few
/// milliseconds on a healthy cluster.
pub const BUCKETS: [f64; 12] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
];

/// The example's settings.
#[derive(Clone, Debug)]
pub struct Config {
    /// Where to serve HTTP.
    pub listen: String,
    /// How many members.
    pub members: usize,
    /// The members' lease duration.
    pub lease: Duration,
    /// The members' renew interval.
    pub renew: Duration,
    /// The health check's limit.
    pub max_age: Duration,
    /// How often the story moves on; `None`: never.
    pub rotate: Option<Duration>,
    /// How long to serve; `None`: until killed.
    pub serve_for: Option<Duration>,
    /// A Kafka cluster to run against.
    pub bootstrap: Option<String>,
}

impl Config {
    /// Parses the command line; `None` for `--help`.
    pub fn from_args(args: &[String]) -> Result<Option<Config>, Failure> {
        let p = parse(
            args,
            &[
                "--listen",
                "--members",
                "--lease-ms",
                "--renew-ms",
                "--max-age-ms",
                "--rotate-ms",
                "--serve-ms",
                "--bootstrap",
            ],
            &["--no-rotate"],
            USAGE,
        )?;
        if p.help() {
            return Ok(None);
        }
        let ms = |name: &str, default: u64| p.positive(name, default).map(Duration::from_millis);
        let renew = ms("--renew-ms", 1000)?;
        let members = p.positive("--members", 3)?;
        if members < 2 {
            return Err(Failure::Usage(format!(
                "--members needs at least 2 (a leader and a standby)\n\n{USAGE}"
            )));
        }
        let config = Config {
            listen: p.value("--listen").unwrap_or("127.0.0.1:9464").to_owned(),
            members: usize::try_from(members).unwrap_or(usize::MAX).min(20),
            lease: ms("--lease-ms", 3000)?,
            renew,
            max_age: ms(
                "--max-age-ms",
                2 * u64::try_from(renew.as_millis()).unwrap_or(0),
            )?,
            rotate: (!p.switch("--no-rotate"))
                .then(|| ms("--rotate-ms", 10_000))
                .transpose()?,
            serve_for: p
                .value("--serve-ms")
                .map(|_| ms("--serve-ms", 1))
                .transpose()?,
            bootstrap: p.value("--bootstrap").map(str::to_owned),
        };
        if config.renew >= config.lease {
            return Err(Failure::Usage(format!(
                "--renew-ms ({} ms) must be shorter than --lease-ms ({} ms)\n\n{USAGE}",
                config.renew.as_millis(),
                config.lease.as_millis()
            )));
        }
        Ok(Some(config))
    }

    /// The members' options (on the system clock).
    pub fn options(&self) -> Options {
        Options::new()
            .lease_duration(self.lease)
            .renew_interval(self.renew)
            .challenge_stagger(self.renew / 2)
    }
}

/// Installs the Prometheus recorder as the process's `metrics` recorder, once; later calls
/// return the same handle. Fails when another recorder was installed first.
pub fn install_recorder() -> Result<PrometheusHandle, Failure> {
    static HANDLE: OnceLock<Result<PrometheusHandle, String>> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("_seconds".to_owned()), &BUCKETS)
                .and_then(PrometheusBuilder::install_recorder)
                .map_err(|e| format!("installing the Prometheus recorder: {e}"))
        })
        .clone()
        .map_err(Failure::Failed)
}

/// One member: its link (to freeze it) and where it is.
struct Member<T> {
    name: String,
    link: Link<T>,
    slot: Slot,
}

enum Slot {
    Waiting(Candidacy),
    Leading(Leadership),
    /// Its candidacy ended while its link was cut; it rejoins once the link is back.
    Out,
}

/// The members, the health check and the HTTP listener. Drive it with [`poll`](Self::poll).
pub struct Service<T> {
    role: String,
    options: Options,
    members: Vec<Member<T>>,
    check: HealthCheck,
    metrics: PrometheusHandle,
    server: Server,
    out: Timeline,
}

impl<T: Transport + Send + Sync + 'static> Service<T> {
    /// Installs the recorder, starts serving on `listen`, and starts `members` members of
    /// `role` (`node-1`, `node-2`, ...) with `options`, each on the transport `connect` gives.
    pub fn start(
        role: &str,
        members: usize,
        options: Options,
        max_age: Duration,
        listen: &str,
        connect: impl Fn(&str) -> Result<T, Failure>,
        out: &Timeline,
    ) -> Result<Service<T>, Failure> {
        let metrics = install_recorder()?;
        let check = HealthCheck::new(max_age);
        let server = Server::start(listen, metrics.clone(), check.clone())?;
        let mut service = Service {
            role: role.to_owned(),
            options,
            members: Vec::new(),
            check,
            metrics,
            server,
            out: out.clone(),
        };
        for i in 1..=members {
            let name = format!("node-{i}");
            let link = Link::new(connect(&name)?);
            let candidacy = service.join(&name, &link)?;
            service.members.push(Member {
                name,
                link,
                slot: Slot::Waiting(candidacy),
            });
        }
        Ok(service)
    }

    fn join(&self, name: &str, link: &Link<T>) -> Result<Candidacy, Failure> {
        blocking::start(link.clone(), &self.role, name, self.options.clone())
            .map_err(|e| Failure::Failed(format!("{name} could not start: {e}")))
    }

    /// Where the HTTP listener listens.
    pub fn addr(&self) -> SocketAddr {
        self.server.addr
    }

    /// The health check `/healthz` answers with.
    pub fn check(&self) -> &HealthCheck {
        &self.check
    }

    /// Catches up with the drivers: an elected member's term is handed to the health check;
    /// a member whose candidacy or term ended rejoins at the tail of the roster (once its link
    /// is up). Also runs the recorder's upkeep. Call it often (the program: every 100 ms).
    pub fn poll(&mut self) -> Result<(), Failure> {
        self.metrics.run_upkeep();
        for i in 0..self.members.len() {
            let slot = std::mem::replace(&mut self.members[i].slot, Slot::Out);
            let name = self.members[i].name.clone();
            let next = match slot {
                Slot::Waiting(c) => match c.elected_blocking_timeout(Duration::ZERO) {
                    Ok(Ok(leadership)) => {
                        self.out.event(
                            &name,
                            format!(
                                "elected: token {}, term {}",
                                leadership.token(),
                                leadership.term()
                            ),
                        );
                        self.check.watch(&leadership);
                        Slot::Leading(leadership)
                    }
                    Ok(Err(e)) => {
                        self.out.event(&name, format!("candidacy ended: {e}"));
                        Slot::Out
                    }
                    Err(c) => Slot::Waiting(c),
                },
                Slot::Leading(l) if l.is_done() => {
                    let why = l.err().map_or("resigned".to_owned(), |e| e.to_string());
                    self.out.event(&name, format!("term over: {why}"));
                    Slot::Out
                }
                other => other,
            };
            self.members[i].slot = match next {
                Slot::Out if !self.members[i].link.is_cut() => {
                    let candidacy = self.join(&name, &self.members[i].link)?;
                    self.out.event(&name, "rejoined at the tail of the roster");
                    Slot::Waiting(candidacy)
                }
                other => other,
            };
        }
        Ok(())
    }

    /// The index and name of the member whose term is on, as of the last [`poll`](Self::poll);
    /// while a frozen leader still believes it leads, the one with the larger term (the term
    /// the broker accepts).
    pub fn leader(&self) -> Option<(usize, &str)> {
        self.members
            .iter()
            .enumerate()
            .filter_map(|(i, m)| match &m.slot {
                Slot::Leading(l) if !l.is_done() => Some((l.term(), i, m.name.as_str())),
                _ => None,
            })
            .max_by_key(|(term, _, _)| *term)
            .map(|(_, i, name)| (i, name))
    }

    /// One line per member: where it is, and what its driver last reported.
    pub fn status(&self) -> String {
        let mut lines = String::new();
        for m in &self.members {
            let (slot, snapshot) = match &m.slot {
                Slot::Waiting(c) => ("waiting", Some(c.snapshot())),
                Slot::Leading(l) => ("leading", Some(l.snapshot())),
                Slot::Out => ("out", None),
            };
            let cut = if m.link.is_cut() { ", link cut" } else { "" };
            lines.push_str(&format!("{} {slot}{cut}: {snapshot:?}\n", m.name));
        }
        lines
    }

    /// The leader resigns (and waits for the hand-over); the next [`poll`](Self::poll) rejoins
    /// it. Returns its name; `None` when nobody leads.
    pub fn resign_leader(&mut self) -> Result<Option<String>, Failure> {
        let Some((i, _)) = self.leader() else {
            return Ok(None);
        };
        let name = self.members[i].name.clone();
        if let Slot::Leading(l) = &self.members[i].slot {
            self.out.event(&name, "resigning");
            if let Err(e) = l.resign_blocking() {
                return Err(Failure::Failed(format!("{name}'s resign: {e}")));
            }
        }
        Ok(Some(name))
    }

    /// Cuts member `i`'s link: its calls fail until [`thaw`](Self::thaw), and it does not
    /// resign.
    pub fn freeze(&self, i: usize) {
        if let Some(m) = self.members.get(i) {
            self.out.event(&m.name, "FROZEN: its link is cut");
            m.link.cut();
        }
    }

    /// Restores member `i`'s link.
    pub fn thaw(&self, i: usize) {
        if let Some(m) = self.members.get(i) {
            self.out.event(&m.name, "thawed: its link is back");
            m.link.restore();
        }
    }

    /// Every member leaves (leaders resign, standbys cancel) and the listener stops.
    pub fn stop(mut self) {
        for m in &self.members {
            m.link.restore();
        }
        for m in self.members.drain(..) {
            match m.slot {
                Slot::Leading(l) => {
                    let _ = l.resign_blocking();
                }
                Slot::Waiting(c) => {
                    let _ = c.resign_blocking();
                }
                Slot::Out => {}
            }
        }
        self.server.stop();
    }
}

/// Runs the example with command-line `args`, printing to `out`.
pub fn run(args: &[String], out: &Timeline) -> Result<(), Failure> {
    let Some(config) = Config::from_args(args)? else {
        out.note(USAGE);
        return Ok(());
    };
    match &config.bootstrap {
        None => {
            let broker = kafka_coordination::memory::MemoryBroker::new(16, Arc::new(SystemClock));
            let service = Service::start(
                "scheduler",
                config.members,
                config.options(),
                config.max_age,
                &config.listen,
                |name| Ok(broker.transport(name)),
                out,
            )?;
            serve(service, &config, "the embedded MemoryBroker", out)
        }
        Some(bootstrap) => run_kafka(&config, bootstrap, out),
    }
}

#[cfg(feature = "kafka")]
fn run_kafka(config: &Config, bootstrap: &str, out: &Timeline) -> Result<(), Failure> {
    use kafka_coordination::kafka::{KafkaConfig, KafkaTransport};
    let kafka = |client: &str| -> Result<KafkaTransport, Failure> {
        let c =
            KafkaConfig::new(bootstrap, 16).with_client_id(format!("prometheus-example-{client}"));
        KafkaTransport::new(c).map_err(|e| Failure::Failed(format!("Kafka transport: {e}")))
    };
    kafka("admin")?
        .create_topic(1, None)
        .map_err(|e| Failure::Failed(format!("the state topic on {bootstrap}: {e}")))?;
    // A role name no earlier run used, so every run starts from an empty roster.
    let role = format!("prometheus-example-{}", std::process::id());
    let service = Service::start(
        &role,
        config.members,
        config.options(),
        config.max_age,
        &config.listen,
        kafka,
        out,
    )?;
    serve(service, config, &format!("Kafka at {bootstrap}"), out)
}

#[cfg(not(feature = "kafka"))]
fn run_kafka(_config: &Config, bootstrap: &str, _out: &Timeline) -> Result<(), Failure> {
    Err(Failure::Usage(format!(
        "--bootstrap {bootstrap} needs the Kafka transport, which this build does not include.\n\
         Build with the `kafka` feature:\n  \
         cargo run --example prometheus --features kafka -- --bootstrap {bootstrap}"
    )))
}

/// The program's loop on the system clock: poll every 100 ms, move the story on every
/// `--rotate-ms`, stop after `--serve-ms`.
fn serve<T: Transport + Send + Sync + 'static>(
    mut service: Service<T>,
    config: &Config,
    backend: &str,
    out: &Timeline,
) -> Result<(), Failure> {
    let addr = service.addr();
    out.note(format!(
        "prometheus: {} members of role `{}` on {backend}\n  \
         metrics: curl -s http://{addr}/metrics | grep kafka_coordination\n  \
         health:  curl -si http://{addr}/healthz",
        config.members, service.role
    ));
    let started = Instant::now();
    let mut next_move = config.rotate.map(|r| started + r);
    let mut resign_next = true;
    let mut frozen: Option<usize> = None;
    let result = loop {
        std::thread::sleep(Duration::from_millis(100));
        if let Err(e) = service.poll() {
            break Err(e);
        }
        if config.serve_for.is_some_and(|d| started.elapsed() >= d) {
            break Ok(());
        }
        if let Some(i) = frozen {
            if service.leader().is_some_and(|(l, _)| l != i) {
                service.thaw(i);
                frozen = None;
                next_move = config.rotate.map(|r| Instant::now() + r);
            }
            continue;
        }
        if next_move.is_some_and(|at| Instant::now() >= at) {
            if resign_next {
                if let Err(e) = service.resign_leader() {
                    break Err(e);
                }
            } else if let Some((i, _)) = service.leader() {
                service.freeze(i);
                frozen = Some(i);
            }
            resign_next = !resign_next;
            next_move = config.rotate.map(|r| Instant::now() + r);
        }
    };
    service.stop();
    result?;
    out.note("prometheus: OK");
    Ok(())
}

/// The HTTP listener: a thread that answers one GET per connection.
struct Server {
    addr: SocketAddr,
    stopping: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    fn start(
        listen: &str,
        metrics: PrometheusHandle,
        check: HealthCheck,
    ) -> Result<Server, Failure> {
        let listener = TcpListener::bind(listen)
            .map_err(|e| Failure::Failed(format!("listening on {listen}: {e}")))?;
        let addr = listener
            .local_addr()
            .map_err(|e| Failure::Failed(format!("the listener's address: {e}")))?;
        let stopping = Arc::new(AtomicBool::new(false));
        let stop = stopping.clone();
        let thread = std::thread::Builder::new()
            .name("http".to_owned())
            .spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        return;
                    }
                    if let Ok(stream) = stream {
                        // A client that goes away mid-request is its own problem.
                        let _ = answer(stream, &metrics, &check);
                    }
                }
            })
            .map_err(|e| Failure::Failed(format!("the HTTP thread: {e}")))?;
        Ok(Server {
            addr,
            stopping,
            thread: Some(thread),
        })
    }

    fn stop(&mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        // Wakes the accept.
        let _ = TcpStream::connect(self.addr);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Reads one request and answers it: `GET /metrics`, `GET /healthz`, or an error status.
fn answer(
    mut stream: TcpStream,
    metrics: &PrometheusHandle,
    check: &HealthCheck,
) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut reader = BufReader::new(&stream);
    let mut request = String::new();
    reader.read_line(&mut request)?;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header)? == 0 || header.trim_end().is_empty() {
            break;
        }
    }
    let mut parts = request.split_whitespace();
    let method = parts.next().unwrap_or("");
    let path = parts.next().unwrap_or("");
    let path = path.split('?').next().unwrap_or(path);
    let text = "text/plain; charset=utf-8";
    let (status, content_type, body) = match (method, path) {
        ("GET", "/metrics") => (
            "200 OK",
            "text/plain; version=0.0.4; charset=utf-8",
            metrics.render(),
        ),
        ("GET", "/healthz") => match check.check() {
            Ok(()) => ("200 OK", text, "ok\n".to_owned()),
            Err(unhealthy) => ("503 Service Unavailable", text, format!("{unhealthy}\n")),
        },
        ("GET", _) => (
            "404 Not Found",
            text,
            "not found: try /metrics or /healthz\n".to_owned(),
        ),
        _ => (
            "405 Method Not Allowed",
            text,
            "only GET is served\n".to_owned(),
        ),
    };
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    )?;
    stream.flush()
}
