//! `run`: a supervisor that runs a command only while its member leads the role.
//!
//! What it guarantees, and what it does not: see [`run`].

use std::ffi::OsString;
use std::io;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitCode, ExitStatus};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use clap::Args;
use kafka_coordination::core::UnixMillis;
use kafka_coordination::leadership::{Health, Leadership};
use kafka_coordination::options::{parse_duration, TimingSettings};
use kafka_coordination::{blocking, Clock, Error, Options, SystemClock};
use serde_json::{json, Value};

use super::failure::{signal_code, Failure, EXIT_FAILURE, EXIT_TERM_LOST};
use super::output::escaped;
use super::processes::{self, signal_all};
use super::settings::{is_secret_variable, Connection};

#[derive(Args, Debug)]
pub struct RunArgs {
    /// The role to lead.
    #[arg(long)]
    role: String,
    /// This member's id (unique among the role's members; a restarted process uses the same).
    #[arg(long)]
    member: String,
    /// How long a lease lasts (default 30s, or the file's timing.lease_duration).
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    lease_duration: Option<Duration>,
    /// How often the leader renews (default 10s).
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    renew_interval: Option<Duration>,
    /// The gap between consecutive ranks' challenges (default 5s).
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    challenge_stagger: Option<Duration>,
    /// Give up after the cluster was unreachable this long while not leading (default: two
    /// leases).
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    give_up_after: Option<Duration>,
    /// How long the term's processes have between SIGTERM and SIGKILL (at most 24h).
    #[arg(long, value_parser = parse_grace, default_value = "10s", value_name = "DURATION")]
    grace: Duration,
    /// Stop the child (as for a lost term) as soon as the lease it holds runs out without a
    /// renewal, before any fence is seen: for a child that cannot check its term, a leader
    /// cut off from the cluster stops by its own clock.
    #[arg(long)]
    stop_at_deadline: bool,
    /// Campaign again after each term (when the child exits or the term is lost), instead of
    /// exiting.
    #[arg(long)]
    again: bool,
    /// Hand the child the supervisor's connection secrets too (KC_SASL_PASSWORD, ...): by
    /// default they are removed from its environment.
    #[arg(long)]
    pass_secrets: bool,
    /// The command and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    command: Vec<OsString>,
}

impl RunArgs {
    fn timing(&self) -> TimingSettings {
        TimingSettings {
            lease_duration: self.lease_duration,
            renew_interval: self.renew_interval,
            challenge_stagger: self.challenge_stagger,
            give_up_after: self.give_up_after,
            long_poll: None,
            max_clock_skew: None,
        }
    }
}

/// What the supervisor's threads tell its main loop. Messages of a term carry its number, so
/// a late one from an earlier term is told apart.
enum Msg {
    Signal(i32),
    Rank(Option<usize>),
    Elected(Result<Leadership, Error>),
    TermOver(u64),
}

/// Prints the supervisor's events on stderr (the child owns stdout): text, or JSON lines.
struct Reporter {
    json: bool,
    role: String,
    member: String,
}

impl Reporter {
    fn say(&self, event: &str, text: String, fields: Value) {
        if self.json {
            let mut v = fields;
            if !v.is_object() {
                v = json!({});
            }
            v["event"] = event.into();
            v["role"] = self.role.clone().into();
            v["member"] = self.member.clone().into();
            v["at_ms"] = SystemClock.now().0.into();
            eprintln!("{v}");
        } else {
            eprintln!(
                "kafka-coordination: [{} {}] {text}",
                escaped(&self.role),
                escaped(&self.member)
            );
        }
    }
}

fn signal_name(s: i32) -> &'static str {
    match s {
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        libc::SIGHUP => "SIGHUP",
        libc::SIGKILL => "SIGKILL",
        _ => "a signal",
    }
}

/// The exit code of a child: its own, or 128 + the signal that ended it.
fn code_of(status: &ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(c), _) => u8::try_from(c).unwrap_or(1),
        (None, Some(s)) => u8::try_from(128 + s).unwrap_or(255),
        _ => 1,
    }
}

/// The names among `inherited` (the supervisor's environment variables) that the child must
/// not see: the connection secrets, unless `pass_secrets`.
fn withheld<I: IntoIterator<Item = OsString>>(inherited: I, pass_secrets: bool) -> Vec<OsString> {
    if pass_secrets {
        return Vec::new();
    }
    inherited
        .into_iter()
        .filter(|name| name.to_str().is_some_and(is_secret_variable))
        .collect()
}

/// Starts the child in a process group of its own; on Linux the kernel kills it if the
/// supervisor dies. `env` is set on top of the supervisor's environment less `withhold`.
fn spawn_child(
    command: &[OsString],
    env: &[(&str, String)],
    withhold: &[OsString],
) -> io::Result<Child> {
    let (program, args) = command
        .split_first()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no command given"))?;
    let mut cmd = Command::new(program);
    cmd.args(args);
    for k in withhold {
        cmd.env_remove(k);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let parent = std::process::id();
    // SAFETY: the closure runs in the forked child before exec, where only async-signal-safe
    // functions may be called: another thread of the supervisor may have held the allocator's
    // lock at the fork, so allocating could deadlock the child. It calls setpgid, prctl and
    // getppid, and builds its errors from an errno (`last_os_error`, `from_raw_os_error`),
    // which allocates nothing (`io::Error::other` or `new` with a message would box it).
    unsafe {
        cmd.pre_exec(move || {
            if libc::setpgid(0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            #[cfg(target_os = "linux")]
            {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(io::Error::last_os_error());
                }
                // The supervisor died between the fork and the prctl: do not start. ESRCH (no
                // such process: the parent is gone); nobody is left to read the error.
                if u32::try_from(libc::getppid()).ok() != Some(parent) {
                    return Err(io::Error::from_raw_os_error(libc::ESRCH));
                }
            }
            #[cfg(not(target_os = "linux"))]
            let _ = parent;
            Ok(())
        });
    }
    cmd.spawn()
}

/// How often the supervisor reaps, looks for its child's processes and checks the lease.
const TICK: Duration = Duration::from_millis(100);

/// The longest `--grace` accepted: a day. Longer would be a typo, and would need an `Instant`
/// that a platform may not represent.
const MAX_GRACE: Duration = Duration::from_secs(24 * 3600);

/// `--grace`: a duration of at most [`MAX_GRACE`].
fn parse_grace(text: &str) -> Result<Duration, String> {
    let grace = parse_duration(text)?;
    if grace > MAX_GRACE {
        return Err(format!(
            "{text} is longer than the longest grace period, 24h"
        ));
    }
    Ok(grace)
}

/// Whether the lease the member holds ran out without a renewal (for `--stop-at-deadline`):
/// the term is on and the driver clock's time is at or past the last lease record's deadline.
fn lease_ran_out(health: &Health) -> bool {
    ran_out(health.leading, health.lease_deadline, health.now)
}

/// [`lease_ran_out`] on the parts of a [`Health`].
fn ran_out(leading: bool, deadline: Option<UnixMillis>, now: UnixMillis) -> bool {
    leading && deadline.is_some_and(|d| now >= d)
}

/// Why a term's processes are being stopped; the first cause wins.
#[derive(Clone, Debug)]
enum Ending {
    /// The child exited by itself while the member led, with this code.
    ChildExited(u8),
    /// The term was lost: fenced, failed, or its lease ran out (`--stop-at-deadline`).
    TermLost(String),
    /// SIGTERM or SIGINT reached the supervisor.
    Signal(i32),
}

/// The stop of a term's processes under way: every process got `signal`, and what is left at
/// `kill_at` gets SIGKILL.
struct Stop {
    kill_at: Option<Instant>,
    killed: bool,
}

impl Stop {
    /// Sends `signal` to the child's process group and to every other live descendant.
    fn begin(pid: u32, child_alive: bool, signal: i32, grace: Duration) -> Stop {
        signal_all(
            pid,
            &processes::live_descendants(child_alive.then_some(pid)),
            signal,
        );
        Stop {
            kill_at: Instant::now().checked_add(grace),
            killed: false,
        }
    }
}

/// Runs the command of `args` while this member leads its role.
///
/// What it guarantees, and what it does not:
/// * The child starts only after the member is elected (its first lease is committed), with
///   the term's pair and number in its environment, in a process group of its own.
/// * A term ends when it is lost (fenced: a newer leader exists; or, with
///   `--stop-at-deadline`, its lease ran out without a renewal), when SIGTERM or SIGINT
///   reaches the supervisor, or when the child exits by itself. Then every process of the term
///   gets the signal (SIGTERM, or the SIGINT received): the child's process group and every
///   other descendant of the supervisor (on Linux it is a child subreaper, so orphans and
///   `setsid` daemons of the child are its descendants too). What is still running after
///   `--grace` gets SIGKILL. Only when every one of them has exited and been reaped does the
///   supervisor resign, campaign again (`--again`) or exit: a successor is never elected
///   through a resign while a process of the term runs.
/// * Between a fence and the end of the grace period the child may still act: work that must
///   never overlap a successor's goes through a store that checks `KC_TERM` (keep the highest
///   term seen, refuse lower ones) or the pair.
/// * Exit codes: see [`super::failure`] (the child's own when it exited by itself while
///   leading; [`EXIT_TERM_LOST`] after a lost term whatever the child's code; 128 + the
///   signal when stopped by one). SIGHUP is passed on to the child's process group and changes
///   nothing else.
/// * If the supervisor itself is killed (SIGKILL, a crash), on Linux the kernel kills the
///   child at once (`PR_SET_PDEATHSIG`), not the child's own children; the lease then runs out
///   and a standby takes over after its deadline. If the supervisor is cut off from the
///   cluster, it sees no fence. What bounds the overlap then: the broker refuses the old
///   term's guarded writes once a newer leader exists, a store that checks `KC_TERM` refuses
///   the old term's writes, and `--stop-at-deadline` stops the child once its lease ran out
///   (a standby challenges only after that deadline, by its own clock).
/// * The supervisor is not dumpable (Linux): the child, though it runs as the same user,
///   cannot read its environment or memory. The child inherits the supervisor's environment
///   without its connection secrets (`KC_SASL_PASSWORD`, and any other `KC_*` variable named
///   as a secret: see [`is_secret_variable`]) unless `--pass-secrets` asks for them.
pub fn run(c: &Connection, args: RunArgs) -> Result<ExitCode, Failure> {
    processes::prepare_supervisor()
        .map_err(|e| Failure::failed(format!("cannot become a subreaper: {e}")))?;
    let (_, file_timing) = c.settings()?;
    let timing = file_timing.merge(args.timing());
    let client = Arc::new(c.connect()?);
    let options = timing.apply(Options::new());
    let out = Reporter {
        json: c.json,
        role: args.role.clone(),
        member: args.member.clone(),
    };
    let (tx, rx) = mpsc::channel::<Msg>();
    let mut signals =
        signal_hook::iterator::Signals::new([libc::SIGTERM, libc::SIGINT, libc::SIGHUP])
            .map_err(|e| Failure::failed(format!("cannot handle signals: {e}")))?;
    {
        let tx = tx.clone();
        thread::spawn(move || {
            for s in signals.forever() {
                if tx.send(Msg::Signal(s)).is_err() {
                    return;
                }
            }
        });
    }
    let mut generation = 0u64;
    loop {
        generation += 1;
        // ---- campaign ----
        let candidacy = blocking::start(client.clone(), &args.role, &args.member, options.clone())
            .map_err(Failure::from_error)?;
        let cancel = candidacy.cancel_handle();
        out.say(
            "campaigning",
            "registered; waiting for its turn".to_owned(),
            json!({}),
        );
        {
            let tx = tx.clone();
            thread::spawn(move || {
                let mut candidacy = candidacy;
                let mut rank = None;
                loop {
                    match candidacy.elected_blocking_timeout(Duration::from_millis(200)) {
                        Ok(result) => {
                            let _ = tx.send(Msg::Elected(result));
                            return;
                        }
                        Err(c) => {
                            let now = c.snapshot().rank;
                            if now != rank && now.is_some() {
                                rank = now;
                                if tx.send(Msg::Rank(now)).is_err() {
                                    return;
                                }
                            }
                            candidacy = c;
                        }
                    }
                }
            });
        }
        let mut signalled: Option<i32> = None;
        let leadership = loop {
            match rx.recv() {
                Ok(Msg::Elected(Ok(l))) => break l,
                Ok(Msg::Elected(Err(e))) => {
                    if let Some(s) = signalled {
                        out.say(
                            "stopped",
                            format!("{} received while waiting: withdrew", signal_name(s)),
                            json!({ "signal": signal_name(s) }),
                        );
                        return Ok(ExitCode::from(signal_code(s)));
                    }
                    return Err(Failure::from_error(e).context(format!(
                        "the candidacy for role {} failed",
                        escaped(&args.role)
                    )));
                }
                Ok(Msg::Rank(Some(r))) => out.say(
                    "standby",
                    format!("standby at rank {r} (challenges at the deadline + {r} x stagger)"),
                    json!({ "rank": r }),
                ),
                Ok(Msg::Signal(libc::SIGHUP)) => {}
                Ok(Msg::Signal(s)) => {
                    signalled.get_or_insert(s);
                    cancel.cancel();
                }
                Ok(_) => {}
                Err(_) => return Err(Failure::failed("the supervisor's channel closed")),
            }
        };
        if let Some(s) = signalled {
            // Elected just as the signal came: leave at once.
            let _ = leadership.resign_blocking();
            return Ok(ExitCode::from(signal_code(s)));
        }
        let (token, term) = (leadership.token(), leadership.term());
        let leadership = Arc::new(leadership);
        let env = [
            ("KC_ROLE", args.role.clone()),
            ("KC_MEMBER", args.member.clone()),
            ("KC_TOKEN", token.to_string()),
            ("KC_PRODUCER_ID", token.producer_id.to_string()),
            ("KC_PRODUCER_EPOCH", token.producer_epoch.to_string()),
            ("KC_TERM", term.to_string()),
            ("KC_SUPERVISOR_PID", std::process::id().to_string()),
        ];
        let withhold = withheld(std::env::vars_os().map(|(k, _)| k), args.pass_secrets);
        let child = match spawn_child(&args.command, &env, &withhold) {
            Ok(child) => child,
            Err(e) => {
                let _ = leadership.resign_blocking();
                return Err(Failure::failed(format!(
                    "cannot start {:?}: {e} (resigned the role)",
                    args.command[0]
                )));
            }
        };
        let pid = child.id();
        // The supervisor reaps its children itself (`processes::reap`), this one included.
        drop(child);
        out.say(
            "elected",
            format!("elected: term {term}, pair {token}; started the child (pid {pid})"),
            json!({ "term": term, "token": token.to_string(), "pid": pid }),
        );
        {
            let tx = tx.clone();
            let leadership = leadership.clone();
            thread::spawn(move || {
                leadership.done_blocking();
                let _ = tx.send(Msg::TermOver(generation));
            });
        }
        // ---- supervise ----
        let mut ending: Option<Ending> = None;
        let mut stop: Option<Stop> = None;
        let mut child_code: Option<u8> = None;
        loop {
            let mut begin: Option<(Ending, i32)> = None;
            match rx.recv_timeout(TICK) {
                Ok(Msg::Signal(libc::SIGHUP)) => {
                    signal_all(pid, &[], libc::SIGHUP);
                }
                Ok(Msg::Signal(s)) => {
                    if signalled.is_none() {
                        signalled = Some(s);
                        out.say(
                            "stopping",
                            format!(
                                "{} received: passed on to every process of the term",
                                signal_name(s)
                            ),
                            json!({ "signal": signal_name(s) }),
                        );
                        begin = Some((Ending::Signal(s), s));
                    }
                }
                Ok(Msg::TermOver(g)) if g == generation => {
                    let why = leadership
                        .err()
                        .map_or_else(|| "the term ended".to_owned(), |e| e.to_string());
                    begin = Some((Ending::TermLost(why), libc::SIGTERM));
                }
                Ok(_) | Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(Failure::failed("the supervisor's channel closed"))
                }
            }
            for (reaped, status) in processes::reap() {
                if reaped == pid {
                    let code = code_of(&status);
                    child_code = Some(code);
                    out.say(
                        "child_exited",
                        format!("the child exited with code {code}"),
                        json!({ "code": code, "pid": pid }),
                    );
                    if ending.is_none() && begin.is_none() {
                        begin = Some((Ending::ChildExited(code), libc::SIGTERM));
                    }
                }
            }
            if args.stop_at_deadline
                && ending.is_none()
                && begin.is_none()
                && lease_ran_out(&leadership.health())
            {
                begin = Some((
                    Ending::TermLost("its lease ran out without a renewal".to_owned()),
                    libc::SIGTERM,
                ));
            }
            if let Some((why, signal)) = begin {
                if let Ending::TermLost(reason) = &why {
                    if ending.is_none() {
                        out.say(
                            "term_over",
                            format!(
                                "the term is over ({reason}): stopping every process of the \
                                 term with SIGTERM"
                            ),
                            json!({ "term": term, "reason": reason }),
                        );
                    }
                }
                ending.get_or_insert(why);
                // A signal during a stop already under way is passed on too (a SIGINT after
                // a fence), without moving the SIGKILL.
                let started = Stop::begin(pid, child_code.is_none(), signal, args.grace);
                stop.get_or_insert(started);
            }
            let Some(s) = stop.as_mut() else { continue };
            let left = processes::live_descendants(child_code.is_none().then_some(pid));
            if left.is_empty() && child_code.is_some() {
                out.say(
                    "all_exited",
                    format!("every process of term {term} has exited"),
                    json!({ "term": term }),
                );
                break;
            }
            let due = s.kill_at.is_some_and(|at| Instant::now() >= at);
            if due && !s.killed {
                out.say(
                    "killing",
                    format!(
                        "{} process(es) of the term still running after {:?}: SIGKILL",
                        left.len(),
                        args.grace
                    ),
                    json!({ "pid": pid, "pids": left }),
                );
                s.killed = true;
            }
            if s.killed {
                // Again at each tick: a process may have forked as the first SIGKILL went out.
                signal_all(pid, &left, libc::SIGKILL);
            }
        }
        if !leadership.is_done() {
            match leadership.resign_blocking() {
                Ok(()) => out.say(
                    "resigned",
                    format!("resigned term {term}: a standby takes over at once"),
                    json!({ "term": term }),
                ),
                Err(e) => out.say(
                    "resigned",
                    format!("resigned term {term}, incompletely: {e}"),
                    json!({ "term": term, "error": e.to_string() }),
                ),
            }
        }
        // A signal wins (the operator stopped it), then a lost term, then the child's code.
        let code = match (signalled, ending) {
            (Some(s), _) | (None, Some(Ending::Signal(s))) => signal_code(s),
            (None, Some(Ending::TermLost(_))) => EXIT_TERM_LOST,
            (None, Some(Ending::ChildExited(code))) => code,
            // Not reached: the loop ends only after a stop began.
            (None, None) => child_code.unwrap_or(EXIT_FAILURE),
        };
        if signalled.is_some() || !args.again {
            return Ok(ExitCode::from(code));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grace_period_is_bounded_at_a_day() {
        assert_eq!(parse_grace("24h"), Ok(MAX_GRACE));
        assert_eq!(parse_grace("1500ms"), Ok(Duration::from_millis(1500)));
        let e = parse_grace("24h1ms").expect_err("over a day");
        assert!(e.contains("24h"), "{e}");
        assert!(parse_grace("18446744073709551615s").is_err());
        assert!(Instant::now().checked_add(MAX_GRACE).is_some());
    }

    #[test]
    fn the_lease_ran_out_at_its_deadline_while_leading_only() {
        let d = Some(UnixMillis(1_000));
        assert!(!ran_out(true, d, UnixMillis(999)));
        assert!(ran_out(true, d, UnixMillis(1_000)));
        assert!(ran_out(true, d, UnixMillis(5_000)));
        assert!(
            !ran_out(false, d, UnixMillis(5_000)),
            "the term is already over"
        );
        assert!(
            !ran_out(true, None, UnixMillis(5_000)),
            "no lease written yet"
        );
    }

    fn names(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    /// Every environment variable of the tool's flags that carries a secret is withheld, the
    /// others are passed on, and `--pass-secrets` passes everything.
    #[test]
    fn the_child_gets_no_connection_secret_unless_asked() {
        let command = <Connection as clap::Args>::augment_args(clap::Command::new("kc"));
        let variables: Vec<OsString> = command
            .get_arguments()
            .filter_map(|a| a.get_env().map(OsString::from))
            .collect();
        assert!(variables.contains(&"KC_SASL_PASSWORD".into()));
        let mut inherited = variables.clone();
        inherited.extend(names(&[
            "PATH",
            "HOME",
            "KC_SASL_OAUTHBEARER_TOKEN",
            "MY_PASSWORD",
        ]));
        let withheld = withheld(inherited.clone(), false);
        assert_eq!(
            withheld,
            names(&[
                "KC_SASL_PASSWORD",
                "KC_SASL_OAUTHBEARER_TOKEN_FILE",
                "KC_SASL_OAUTHBEARER_TOKEN"
            ]),
            "the secrets among {variables:?}"
        );
        for arg in command.get_arguments() {
            let (Some(env), id) = (arg.get_env(), arg.get_id().as_str()) else {
                continue;
            };
            let secret = kafka_coordination::kafka::is_secret_property(id);
            assert_eq!(withheld.contains(&env.into()), secret, "{id} ({env:?})");
        }
        assert!(super::withheld(inherited, true).is_empty());
    }

    #[test]
    fn connection_debug_shows_no_secret() {
        let cli = <Connection as clap::FromArgMatches>::from_arg_matches(
            &<Connection as clap::Args>::augment_args(clap::Command::new("kc"))
                .try_get_matches_from([
                    "kc",
                    "--sasl-username",
                    "alice",
                    "--sasl-password",
                    "flag-pw-77",
                    "-X",
                    "ssl.key.pem=pem-body-77",
                    "-X",
                    "sasl.jaas.config=jaas-77",
                    "-X",
                    "client.rack=rack-a",
                ])
                .expect("valid flags"),
        )
        .expect("parsed");
        for shown in [format!("{cli:?}"), format!("{cli:#?}")] {
            for secret in ["flag-pw-77", "pem-body-77", "jaas-77"] {
                assert!(!shown.contains(secret), "{shown}");
            }
            assert!(
                shown.contains("alice") && shown.contains("rack-a"),
                "{shown}"
            );
            assert!(
                shown.contains("ssl.key.pem") && shown.contains("<redacted>"),
                "{shown}"
            );
        }
        let Ok((settings, _)) = cli.settings() else {
            panic!("settings without a file")
        };
        let file = super::super::settings::FileSettings {
            kafka: settings,
            ..Default::default()
        };
        for shown in [format!("{file:?}"), format!("{file:#?}")] {
            for secret in ["flag-pw-77", "pem-body-77", "jaas-77"] {
                assert!(!shown.contains(secret), "{shown}");
            }
        }
    }
}
