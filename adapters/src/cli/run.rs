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
use kafka_coordination::leadership::Leadership;
use kafka_coordination::options::{parse_duration, TimingSettings};
use kafka_coordination::{blocking, Clock, Error, Options, SystemClock};
use serde_json::{json, Value};

use super::failure::Failure;
use super::output::escaped;
use super::settings::{is_secret_variable, Connection};

#[derive(Args, Debug)]
pub struct RunArgs {
    /// The role to lead.
    #[arg(long)]
    role: String,
    /// This member's id (unique among the role's members; a restarted process uses the same).
    #[arg(long)]
    member: String,
    /// How long a lease lasts (default 30s, or [timing] lease_duration).
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
    /// How long the child has between SIGTERM and SIGKILL.
    #[arg(long, value_parser = parse_duration, default_value = "10s", value_name = "DURATION")]
    grace: Duration,
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
    ChildExited(u64, io::Result<ExitStatus>),
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

/// Sends `signal` to the child's process group (it leads its own group).
fn signal_group(pid: u32, signal: i32) {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return;
    };
    // SAFETY: kill(2) has no memory effects; a group that is gone answers ESRCH, ignored.
    unsafe {
        libc::kill(-pid, signal);
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

/// Runs the command of `args` while this member leads its role.
///
/// What it guarantees, and what it does not:
/// * The child starts only after the member is elected (its first lease is committed), with
///   the term's pair and number in its environment.
/// * The moment the term ends (fenced: a newer leader exists), the child's process group gets
///   SIGTERM, then SIGKILL after the grace period. Between the fence and that signal the child
///   may still act: work that must never overlap a successor's goes through a store that
///   checks `KC_TERM` (keep the highest term seen, refuse lower ones) or the pair.
/// * SIGTERM or SIGINT sent to the supervisor goes to the child's process group; once the
///   child exits the supervisor resigns (its successor is elected at once) and exits with the
///   child's code. SIGHUP is passed on to the child and changes nothing else.
/// * If the supervisor itself is killed (SIGKILL, a crash), on Linux the kernel kills the
///   child at once (`PR_SET_PDEATHSIG`); the lease then runs out and a standby takes over after
///   its deadline, so the child is gone long before. The child's own children are not covered
///   (they are in its process group, which the supervisor signals only while alive). On other
///   Unix systems nothing kills the child when its supervisor dies: there the child must use
///   the term for its writes, or watch its parent.
/// * The child inherits the supervisor's environment without its connection secrets
///   (`KC_SASL_PASSWORD`, and any other `KC_*` variable named as a secret: see
///   [`is_secret_variable`]) unless `--pass-secrets` asks for them.
/// * A leader that cannot reach the cluster keeps its child running (leaders do not fence
///   themselves on time); a standby takes over after the lease, and the old leader's child is
///   stopped when its supervisor sees the fence.
pub fn run(c: &Connection, args: RunArgs) -> Result<ExitCode, Failure> {
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
        let mut stopping: Option<i32> = None;
        let leadership = loop {
            match rx.recv() {
                Ok(Msg::Elected(Ok(l))) => break l,
                Ok(Msg::Elected(Err(e))) => {
                    if let Some(s) = stopping {
                        out.say(
                            "stopped",
                            format!("{} received while waiting: withdrew", signal_name(s)),
                            json!({ "signal": signal_name(s) }),
                        );
                        return Ok(ExitCode::from(u8::try_from(128 + s).unwrap_or(255)));
                    }
                    return Err(Failure::failed(format!(
                        "the candidacy for role {} failed: {e}",
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
                    stopping.get_or_insert(s);
                    cancel.cancel();
                }
                Ok(_) => {}
                Err(_) => return Err(Failure::failed("the supervisor's channel closed")),
            }
        };
        if let Some(s) = stopping {
            // Elected just as the signal came: leave at once.
            let _ = leadership.resign_blocking();
            return Ok(ExitCode::from(u8::try_from(128 + s).unwrap_or(255)));
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
        out.say(
            "elected",
            format!("elected: term {term}, pair {token}; started the child (pid {pid})"),
            json!({ "term": term, "token": token.to_string(), "pid": pid }),
        );
        {
            let tx = tx.clone();
            let mut child = child;
            thread::spawn(move || {
                let status = child.wait();
                let _ = tx.send(Msg::ChildExited(generation, status));
            });
        }
        {
            let tx = tx.clone();
            let leadership = leadership.clone();
            thread::spawn(move || {
                leadership.done_blocking();
                let _ = tx.send(Msg::TermOver(generation));
            });
        }
        // ---- supervise ----
        let mut kill_at: Option<Instant> = None;
        let mut term_lost = false;
        let status = loop {
            let msg = match kill_at {
                Some(at) => match rx.recv_timeout(at.saturating_duration_since(Instant::now())) {
                    Ok(m) => m,
                    Err(RecvTimeoutError::Timeout) => {
                        out.say(
                            "killing",
                            format!("the child did not exit within {:?}: SIGKILL", args.grace),
                            json!({ "pid": pid }),
                        );
                        signal_group(pid, libc::SIGKILL);
                        kill_at = None;
                        continue;
                    }
                    Err(RecvTimeoutError::Disconnected) => {
                        return Err(Failure::failed("the supervisor's channel closed"))
                    }
                },
                None => rx
                    .recv()
                    .map_err(|_| Failure::failed("the supervisor's channel closed"))?,
            };
            match msg {
                Msg::ChildExited(g, status) if g == generation => break status,
                Msg::TermOver(g) if g == generation && !term_lost && stopping.is_none() => {
                    term_lost = true;
                    let why = leadership
                        .err()
                        .map_or_else(|| "the term ended".to_owned(), |e| e.to_string());
                    out.say(
                        "term_over",
                        format!("the term is over ({why}): stopping the child with SIGTERM"),
                        json!({ "term": term, "reason": why }),
                    );
                    signal_group(pid, libc::SIGTERM);
                    kill_at = Some(Instant::now() + args.grace);
                }
                Msg::Signal(libc::SIGHUP) => signal_group(pid, libc::SIGHUP),
                Msg::Signal(s) if stopping.is_none() => {
                    stopping = Some(s);
                    out.say(
                        "stopping",
                        format!("{} received: passed on to the child", signal_name(s)),
                        json!({ "signal": signal_name(s) }),
                    );
                    signal_group(pid, s);
                    if kill_at.is_none() {
                        kill_at = Some(Instant::now() + args.grace);
                    }
                }
                _ => {}
            }
        };
        let status = status.map_err(|e| Failure::failed(format!("waiting for the child: {e}")))?;
        let code = code_of(&status);
        out.say(
            "child_exited",
            format!("the child exited with code {code}"),
            json!({ "code": code, "pid": pid }),
        );
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
        if stopping.is_some() || !args.again {
            return Ok(ExitCode::from(code));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            names(&["KC_SASL_PASSWORD", "KC_SASL_OAUTHBEARER_TOKEN"]),
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
