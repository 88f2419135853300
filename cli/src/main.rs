//! `kafka-coordination`: the operator's tool for roles on a Kafka cluster, built on the public
//! API of the [`kafka_coordination`] crate (its `kafka`, `blocking` and `serde` features).
//!
//! - `describe ROLE`, `roles`, `watch ROLE`: a role's roster, lease and leader, every role in the
//!   state topic, and one line per change of a leader;
//! - `run --role ROLE --member ID -- CMD...`: a supervisor that campaigns for the role and runs
//!   `CMD` only while it leads (the child gets `KC_ROLE`, `KC_MEMBER`, `KC_TERM`, ...);
//! - `deregister ROLE MEMBER`: removes a member that no longer runs;
//! - `topic create|check|create-data`: the state topic and a program's own topic;
//! - `fleet status|drain`: the roles a fleet of members shares, and moving them off one member.
//!
//! Connection settings come from flags, `KC_*` variables or a TOML file (`--config`); every
//! command takes `--json`. Run `kafka-coordination --help`; docs/guide/operating.md describes
//! each command, docs/guide/deploying.md the settings. Unix only.
//!
//! Exit codes: the constants of [`failure`] (0 success, 1 a failure, 2 a usage, configuration
//! or authorization error; `run`: 75 a lost term, 128 + a signal's number, or the child's own
//! code when it exited by itself while leading).

#[cfg(not(unix))]
compile_error!("the kafka-coordination command-line tool supports Unix only");

mod failure;
mod fleet_commands;
mod output;
mod processes;
mod settings;
mod supervisor;

use std::process::ExitCode;
use std::sync::Arc;

use clap::parser::ValueSource;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use kafka_coordination::core::record::{Key, MemberId, Role};
use kafka_coordination::core::{PairRelation, UnixMillis};
use kafka_coordination::describe::{describe_leadership, describe_role_state};
use kafka_coordination::kafka::{Severity, TopicReport};
use kafka_coordination::transport::Wait;
use kafka_coordination::watch::RoleLeader;
use kafka_coordination::watch::{leader_at, roles, LeaseTracker};
use kafka_coordination::{blocking, Clock, SystemClock, WatchEvent, WatchOptions};
use serde_json::json;

use self::failure::Failure;

use self::output::{
    escaped, event_line, leader_json, leader_text, relation_json, relative, time, vacancy_json,
    vacancy_text,
};
use self::settings::Connection;

/// Leader election on Apache Kafka, operated from the shell: look at roles, follow their
/// leaders, run a program only while it leads, remove ghost members, check the state topic,
/// look at a fleet and drain its members.
#[derive(Parser, Debug)]
#[command(name = "kafka-coordination", version)]
struct Cli {
    #[command(flatten)]
    connection: Connection,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// The roster with ranks, the lease (holder, pair, term, deadline, live or not) and the
    /// coordinator's current pair of one role.
    Describe {
        /// The role.
        role: String,
    },
    /// One line per change of a role's leader, live, until interrupted (SIGINT/SIGTERM).
    Watch {
        /// The role.
        role: String,
        /// Also print every renewal of the lease.
        #[arg(long)]
        renewals: bool,
        /// Print every change in the retained log first, not only the current state.
        #[arg(long)]
        history: bool,
        /// Exit after this many lines.
        #[arg(long, value_name = "N")]
        count: Option<usize>,
    },
    /// Every role in the state topic, with its leader.
    Roles {
        /// Also list roles with no member and no lease (only tombstones left).
        #[arg(long)]
        all: bool,
        #[command(flatten)]
        fleet: fleet_commands::RolesFleet,
    },
    /// Campaign for ROLE as MEMBER and run CMD while leading: the child gets KC_ROLE,
    /// KC_MEMBER, KC_TOKEN (producer id/epoch), KC_PRODUCER_ID, KC_PRODUCER_EPOCH, KC_TERM
    /// and KC_SUPERVISOR_PID; when the term ends (lost, a signal, or the child's exit) every process of the
    /// term is stopped (SIGTERM, SIGKILL after --grace) before the supervisor resigns or exits.
    /// Exit codes: the child's own when it exited by itself while leading, 75 after a lost
    /// term, 128 + N after signal N; 1 a failure, 2 a configuration or authorization error.
    Run(supervisor::RunArgs),
    /// Remove a member's registration (a ghost that will not come back), so the members
    /// behind it move up one rank.
    Deregister {
        /// The role.
        role: String,
        /// The member to remove.
        member: String,
        /// Remove it even if it holds the live lease (its term goes on; it is not fenced).
        #[arg(long)]
        force: bool,
    },
    /// Create or check the state topic (__coordination_state).
    Topic {
        #[command(subcommand)]
        action: TopicAction,
    },
    /// A fleet of members that share their roles: its members and who leads what (`status`),
    /// or ask a member to drain (`drain`).
    Fleet {
        #[command(subcommand)]
        action: fleet_commands::FleetAction,
    },
}

#[derive(Subcommand, Debug)]
enum TopicAction {
    /// Create the topic (compacted, --partitions, replication, min.insync.replicas) unless it
    /// exists, then check it.
    Create {
        /// The replication factor (default: 3, or the broker count if smaller).
        #[arg(long)]
        replication_factor: Option<i32>,
        /// min.insync.replicas (default: 2 when replicated, else the broker's default).
        #[arg(long)]
        min_insync_replicas: Option<i32>,
    },
    /// Check compaction, partition count, replication and min.insync.replicas; exit 1 on an
    /// error (or on a warning with --strict).
    Check {
        /// Fail on warnings too.
        #[arg(long)]
        strict: bool,
    },
    /// Create a topic of the program's own, for its guarded writes (not compacted: the
    /// broker's default cleanup.policy), unless it exists; exit 1 if it exists with another
    /// partition count.
    CreateData {
        /// The topic's name (letters, digits, '.', '_', '-'; at most 249 characters).
        name: String,
        /// The partition count.
        #[arg(long, value_parser = clap::value_parser!(i32).range(1..))]
        partitions: i32,
        /// The replication factor (default: 3, or the broker count if smaller).
        #[arg(long)]
        replication_factor: Option<i32>,
        /// min.insync.replicas (default: 2 when replicated, else the broker's default).
        #[arg(long)]
        min_insync_replicas: Option<i32>,
    },
}

/// Why `name` cannot be a Kafka topic's name, if it cannot (Kafka's own rule).
fn topic_name_error(name: &str) -> Option<String> {
    let bad = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "._-".contains(*c)));
    if name.is_empty() || name == "." || name == ".." {
        Some(format!("'{}' is not a topic name", escaped(name)))
    } else if name.len() > 249 {
        Some(format!(
            "the topic name has {} characters; Kafka allows at most 249",
            name.len()
        ))
    } else {
        bad.map(|c| {
            format!(
                "the topic name '{}' has the character {c:?}; Kafka allows letters, digits, '.', \
                 '_' and '-'",
                escaped(name)
            )
        })
    }
}

fn main() -> ExitCode {
    let matches = Cli::command().get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    let json = cli.connection.json;
    let flag = matches.value_source("sasl_password") == Some(ValueSource::CommandLine);
    cli.connection
        .warn_about_command_line(&cli.connection.secrets_on_command_line(flag));
    match dispatch(cli) {
        Ok(code) => code,
        Err(f) => {
            let help = f.troubleshooting();
            if json {
                let mut line = json!({ "error": f.message, "exit_code": f.code });
                if let Some(help) = help {
                    line["troubleshooting"] = json!(help);
                }
                eprintln!("{line}");
            } else {
                eprintln!("kafka-coordination: error: {}", f.message);
                if let Some(help) = help {
                    eprintln!("kafka-coordination: hint: see {help}");
                }
            }
            ExitCode::from(f.code)
        }
    }
}

fn dispatch(cli: Cli) -> Result<ExitCode, Failure> {
    let c = &cli.connection;
    match cli.command {
        Command::Describe { role } => describe(c, &role),
        Command::Watch {
            role,
            renewals,
            history,
            count,
        } => watch(c, &role, renewals, history, count),
        Command::Roles { all, fleet } => list_roles(c, all, &fleet),
        Command::Run(args) => supervisor::run(c, args),
        Command::Deregister {
            role,
            member,
            force,
        } => deregister(c, &role, &member, force),
        Command::Topic { action } => topic(c, action),
        Command::Fleet { action } => fleet_commands::fleet(c, action),
    }
}

fn now() -> UnixMillis {
    SystemClock.now()
}

fn describe(c: &Connection, role: &str) -> Result<ExitCode, Failure> {
    let role_name = Role::new(role).map_err(Failure::usage)?;
    let client = c.connect()?;
    let partition = client
        .role_partition(&role_name)
        .map_err(Failure::transport)?;
    let state = describe_role_state(&client, role).map_err(Failure::from_error)?;
    let now = now();
    let leader = leader_at(&client, role, now).map_err(Failure::from_error)?;
    let status = describe_leadership(&client, role).map_err(Failure::from_error)?;
    let holder = state.lease().map(|e| e.lease.member.clone());
    let lease_pair = match &leader {
        RoleLeader::Leading(l) => Some(l.token),
        RoleLeader::Vacant(v) => v
            .previous
            .as_ref()
            .map(|p| p.token)
            .filter(|_| state.lease().is_some()),
    };
    // Only a leading lease is live; a vacancy's previous lease expired or was resigned.
    let live = matches!(leader, RoleLeader::Leading(_));
    let relation = lease_pair.map(|t| status.relation(&t, live));
    let current = relation.is_some_and(|r| r.is_current());
    let roster: Vec<(MemberId, i64, Option<usize>, bool)> = state
        .roster()
        .map(|(m, offset)| {
            let is_holder = holder.as_ref() == Some(m);
            let rank = (!is_holder).then(|| state.rank_of(m)).flatten();
            (m.clone(), offset, rank, is_holder)
        })
        .collect();
    if c.json {
        let v = json!({
            "role": role,
            "topic": client.config().topic(),
            "partition": partition,
            "leader": leader.leader().map(|l| leader_json(l, now)),
            "vacancy": match &leader { RoleLeader::Vacant(v) => Some(vacancy_json(v, now)), _ => None },
            "coordinator": {
                "token": status.token.to_string(),
                "producer_id": status.token.producer_id,
                "producer_epoch": status.token.producer_epoch,
                "state": status.state.as_ref().map(|s| s.as_str().to_owned()),
                "transaction_started_ms": status.transaction_started.map(|t| t.0),
                "lease_pair_is_current": current,
                "lease_pair_relation": relation_json(relation.as_ref()),
                "transaction_version": status.transaction_version,
            },
            "roster": roster.iter().map(|(m, offset, rank, leader)| json!({
                "member": m.as_str(), "join_offset": offset, "rank": rank, "leader": leader,
                "passed_over": state.passed_over(m),
            })).collect::<Vec<_>>(),
            "malformed_records": state.malformed(),
        });
        println!("{v}");
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "role         {} (partition {partition} of {})",
        escaped(role),
        escaped(client.config().topic())
    );
    match &leader {
        RoleLeader::Leading(l) => println!(
            "leader       {} (lease live, {})",
            leader_text(l),
            relative(l.deadline, now)
        ),
        RoleLeader::Vacant(v) => println!("leader       none ({})", vacancy_text(v)),
    }
    let state_text = status
        .state
        .as_ref()
        .map(|s| match status.transaction_started {
            Some(began) => format!("{}, began {}", s.as_str(), relative(began, now)),
            None => s.as_str().to_owned(),
        })
        .unwrap_or_else(|| "never taken".to_owned());
    let verdict = relation.map_or_else(|| "no lease".to_owned(), |r| r.to_string());
    println!(
        "coordinator  pair {} ({state_text}): {verdict}",
        status.token
    );
    if let Some(note) = relation.as_ref().and_then(|r| r.note()) {
        println!("note         {note}");
    }
    println!("roster       {} member(s), in join order", roster.len());
    if roster.iter().any(|(m, ..)| state.passed_over(m)) {
        println!(
            "             passed: joined ahead of a member that has led since; not ranked until \
             it registers again"
        );
    }
    if !roster.is_empty() {
        println!("  {:<6} {:<24} JOINED AT OFFSET", "RANK", "MEMBER");
        for (m, offset, rank, is_holder) in &roster {
            let rank = match (rank, is_holder) {
                (_, true) => "leader".to_owned(),
                (Some(r), _) => r.to_string(),
                (None, _) if state.passed_over(m) => "passed".to_owned(),
                (None, _) => "-".to_owned(),
            };
            println!("  {rank:<6} {:<24} {offset}", escaped(m.as_str()));
        }
    }
    if state.malformed() > 0 {
        println!(
            "warning      {} malformed record(s) skipped",
            state.malformed()
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn watch(
    c: &Connection,
    role: &str,
    renewals: bool,
    history: bool,
    count: Option<usize>,
) -> Result<ExitCode, Failure> {
    Role::new(role).map_err(Failure::usage)?;
    let client = Arc::new(c.connect()?);
    let options = WatchOptions::new().renewals(renewals).history(history);
    let watch = blocking::watch(client, role, options).map_err(Failure::from_error)?;
    let stop = watch.stop_handle();
    let mut signals = signal_hook::iterator::Signals::new([libc::SIGINT, libc::SIGTERM])
        .map_err(|e| Failure::failed(format!("cannot handle signals: {e}")))?;
    std::thread::spawn(move || {
        if signals.forever().next().is_some() {
            stop.stop();
        }
    });
    for (index, item) in watch.enumerate() {
        let event: WatchEvent = item.map_err(Failure::from_error)?;
        println!("{}", event_line(role, &event, now(), c.json));
        if count.is_some_and(|n| index + 1 >= n) {
            break;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn list_roles(
    c: &Connection,
    all: bool,
    fleet: &fleet_commands::RolesFleet,
) -> Result<ExitCode, Failure> {
    let fleet = fleet.checked(c)?;
    let client = c.connect()?;
    let now = now();
    let mut found: Vec<LeaseTracker> = roles(&client).map_err(Failure::from_error)?;
    let preferences = match &fleet {
        Some(f) => Some(f.preferences(c, &found, now)?),
        None => None,
    };
    let preference_of = |name: &str| preferences.as_ref().and_then(|p| p.get(name));
    if !all {
        found.retain(|t| !t.state().is_empty() || t.state().lease().is_some());
    }
    let rows: Vec<(String, RoleLeader, usize)> = found
        .iter_mut()
        .map(|t| {
            let name = t.state().role().as_str().to_owned();
            let members = t.state().len();
            (name, t.current(now), members)
        })
        .collect();
    // How each leader's lease pair stands at the coordinator: one batched DescribeTransactions
    // per coordinator for the roles with a leader. A role the check cannot answer (no DESCRIBE
    // ACL, a coordinator away) shows no relation; the listing itself does not fail for it.
    let leading: Vec<Role> = rows
        .iter()
        .filter(|(_, leader, _)| leader.leader().is_some())
        .filter_map(|(name, _, _)| Role::new(name.as_str()).ok())
        .collect();
    let statuses = if leading.is_empty() {
        Vec::new()
    } else {
        client.describe_epochs(&leading)
    };
    let relation_of = |name: &str, l: &kafka_coordination::watch::Leader| {
        leading
            .iter()
            .position(|r| r.as_str() == name)
            .and_then(|i| statuses.get(i))
            .and_then(|s| s.as_ref().ok())
            .map(|s| s.relation(&l.token, l.is_live(now)))
    };
    if c.json {
        let v: Vec<_> = rows
            .iter()
            .map(|(name, leader, members)| {
                let relation = leader.leader().and_then(|l| relation_of(name, l));
                let mut v = json!({
                    "role": name,
                    "members": members,
                    "leader": leader.leader().map(|l| leader_json(l, now)),
                    "lease_pair_relation": relation_json(relation.as_ref()),
                    "vacancy": match leader { RoleLeader::Vacant(v) => Some(vacancy_json(v, now)), _ => None },
                });
                if preferences.is_some() {
                    // A role outside the fleet has neither.
                    let p = preference_of(name);
                    v["preferred"] = json!(p.and_then(|p| p.preferred.as_deref()));
                    v["in_motion"] = json!(p.map(|p| p.in_motion));
                }
                v
            })
            .collect();
        println!("{}", serde_json::Value::Array(v));
        return Ok(ExitCode::SUCCESS);
    }
    // The names as printed (escaped), which the column widths follow.
    let names: Vec<(String, String)> = rows
        .iter()
        .map(|(name, leader, _)| {
            let member = leader.leader().map_or_else(
                || "-".to_owned(),
                |l| escaped(l.member.as_str()).into_owned(),
            );
            (escaped(name).into_owned(), member)
        })
        .collect();
    let width = |f: &dyn Fn(&(String, String)) -> usize, min: usize| {
        names.iter().map(f).max().unwrap_or(0).max(min)
    };
    let rw = width(&|r| r.0.chars().count(), 4);
    let lw = width(&|r| r.1.chars().count(), 6);
    // The lease's pair, marked when it is not the coordinator's current one: `(+N tv2)` when
    // it is N epochs behind through the leader's own transaction-version-2 commits,
    // `(superseded)` otherwise.
    let pair_text = |name: &str, l: &kafka_coordination::watch::Leader| match relation_of(name, l) {
        Some(PairRelation::CommitsLater { by }) => format!("{} (+{by} tv2)", l.token),
        Some(PairRelation::Superseded) => format!("{} (superseded)", l.token),
        _ => l.token.to_string(),
    };
    let pairs: Vec<String> = rows
        .iter()
        .map(|(name, leader, _)| {
            leader
                .leader()
                .map_or_else(|| "-".to_owned(), |l| pair_text(name, l))
        })
        .collect();
    let pw = pairs.iter().map(String::len).max().unwrap_or(0).max(4);
    // With --fleet: the preferred owner of each role of the fleet, marked when the role is in
    // motion; a role outside the fleet shows nothing there.
    let preferred: Vec<String> = rows
        .iter()
        .map(|(name, _, _)| match preference_of(name) {
            None => String::new(),
            Some(p) => {
                let who = p
                    .preferred
                    .as_deref()
                    .map_or_else(|| "-".to_owned(), |m| escaped(m).into_owned());
                if p.in_motion {
                    format!("{who} (moving)")
                } else {
                    who
                }
            }
        })
        .collect();
    let fw = preferred
        .iter()
        .map(|p| p.chars().count())
        .max()
        .unwrap_or(0)
        .max(9);
    let preferred_cell = |p: &str| {
        if preferences.is_some() {
            format!("{p:<fw$}  ")
        } else {
            String::new()
        }
    };
    println!(
        "{:<rw$}  {:<lw$}  {}{:>8}  {:<pw$}  {:>7}  LEASE",
        "ROLE",
        "LEADER",
        preferred_cell("PREFERRED"),
        "TERM",
        "PAIR",
        "MEMBERS"
    );
    let mut tv2 = false;
    for ((((name, leader, members), pair), (shown, member)), wanted) in
        rows.iter().zip(&pairs).zip(&names).zip(&preferred)
    {
        let wanted = preferred_cell(wanted);
        match leader {
            RoleLeader::Leading(l) => {
                tv2 |= matches!(
                    relation_of(name, l),
                    Some(PairRelation::CommitsLater { .. })
                );
                println!(
                    "{shown:<rw$}  {member:<lw$}  {wanted}{:>8}  {pair:<pw$}  {members:>7}  until {} ({})",
                    l.term,
                    time(l.deadline),
                    relative(l.deadline, now)
                )
            }
            RoleLeader::Vacant(v) => println!(
                "{shown:<rw$}  {member:<lw$}  {wanted}{:>8}  {:<pw$}  {members:>7}  {}",
                "-",
                "-",
                vacancy_text(v)
            ),
        }
    }
    if let Some(p) = &preferences {
        let moving = p.values().filter(|p| p.in_motion).count();
        println!(
            "fleet {}: {} role(s), {moving} in motion",
            escaped(fleet.as_ref().map_or("", |f| f.name())),
            p.len()
        );
    }
    if tv2 {
        if let Some(note) = (PairRelation::CommitsLater { by: 1 }).note() {
            println!("(+N tv2): {note}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn deregister(c: &Connection, role: &str, member: &str, force: bool) -> Result<ExitCode, Failure> {
    let role_name = Role::new(role).map_err(Failure::usage)?;
    let member_id = MemberId::new(member).map_err(Failure::usage)?;
    let client = c.connect()?;
    let state = describe_role_state(&client, role).map_err(Failure::from_error)?;
    if state.join_offset(&member_id).is_none() {
        let roster: Vec<_> = state.roster().map(|(m, _)| escaped(m.as_str())).collect();
        return Err(Failure::failed(format!(
            "member {} is not registered for role {} (roster: {})",
            escaped(member),
            escaped(role),
            if roster.is_empty() {
                "empty".to_owned()
            } else {
                roster.join(", ")
            }
        )));
    }
    let now = now();
    let leading = leader_at(&client, role, now).map_err(Failure::from_error)?;
    let is_leader = leading.leader().filter(|l| l.member == member_id).cloned();
    if let (Some(l), false) = (&is_leader, force) {
        return Err(Failure::failed(format!(
            "member {} holds the live lease of role {} (term {}, until {}): it is the leader, \
             not a ghost. Stop its process (it resigns), or pass --force to remove its \
             registration anyway (its term goes on; it is not fenced)",
            escaped(member),
            escaped(role),
            l.term,
            time(l.deadline)
        )));
    }
    let partition = client
        .role_partition(&role_name)
        .map_err(Failure::transport)?;
    let key = Key::registration(role_name, member_id).encode();
    let offset = client
        .append(partition, &key, None)
        .map_err(Failure::transport)?;
    if c.json {
        println!(
            "{}",
            json!({ "role": role, "member": member, "deregistered": true, "offset": offset, "was_leader": is_leader.is_some() })
        );
    } else {
        println!(
            "removed the registration of {} from role {} (tombstone at offset {offset}); the \
             members behind it move up one rank",
            escaped(member),
            escaped(role)
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn print_report(
    c: &Connection,
    report: &TopicReport,
    partitions: i32,
    strict: bool,
    created: Option<bool>,
) -> ExitCode {
    let findings = report.findings(partitions);
    let errors = findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .count();
    let warnings = findings
        .iter()
        .filter(|f| f.severity == Severity::Warning)
        .count();
    let ok = errors == 0 && (!strict || warnings == 0);
    if c.json {
        let v = json!({
            "topic": report.topic,
            "created": created,
            "exists": report.exists,
            "brokers": report.brokers,
            "partitions": report.partitions,
            "replication_factor": report.replication_factor,
            "cleanup_policy": report.cleanup_policy,
            "min_insync_replicas": report.min_insync_replicas,
            "compression_type": report.compression_type,
            "findings": findings.iter().map(|f| json!({
                "severity": match f.severity {
                    Severity::Error => "error",
                    Severity::Info => "info",
                    _ => "warning",
                },
                "message": f.message,
            })).collect::<Vec<_>>(),
            "ok": ok,
        });
        println!("{v}");
    } else {
        if let Some(created) = created {
            println!(
                "topic {}: {}",
                report.topic,
                if created { "created" } else { "already exists" }
            );
        }
        if report.exists {
            let show = |v: Option<String>| v.unwrap_or_else(|| "?".to_owned());
            println!(
                "topic {}: {} partitions, replication factor {}, cleanup.policy={}, min.insync.replicas={}, compression.type={} (cluster of {} broker(s))",
                report.topic,
                show(report.partitions.map(|p| p.to_string())),
                show(report.replication_factor.map(|p| p.to_string())),
                show(report.cleanup_policy.clone()),
                show(report.min_insync_replicas.map(|p| p.to_string())),
                show(report.compression_type.clone()),
                report.brokers
            );
        }
        for f in &findings {
            let label = match f.severity {
                Severity::Error => "error",
                Severity::Info => "info",
                _ => "warning",
            };
            println!("{label}: {}", f.message);
        }
        println!(
            "{}: {errors} error(s), {warnings} warning(s)",
            if ok { "ok" } else { "FAILED" }
        );
    }
    if ok {
        ExitCode::from(failure::EXIT_OK)
    } else {
        ExitCode::from(failure::EXIT_FAILURE)
    }
}

fn topic(c: &Connection, action: TopicAction) -> Result<ExitCode, Failure> {
    if let TopicAction::CreateData { name, .. } = &action {
        if let Some(e) = topic_name_error(name) {
            return Err(Failure::usage(e));
        }
    }
    let config = c.topic_config(16)?;
    let client =
        kafka_coordination::kafka::KafkaTransport::new(config).map_err(Failure::transport)?;
    match action {
        TopicAction::Check { strict } => {
            let report = client.describe_topic().map_err(Failure::transport)?;
            // Without an explicit count, the members must use the topic's own.
            let partitions = match c.settings()?.0.partitions {
                Some(p) => p,
                None => report.partitions.unwrap_or(client.config().partitions()),
            };
            Ok(print_report(c, &report, partitions, strict, None))
        }
        TopicAction::CreateData {
            name,
            partitions,
            replication_factor,
            min_insync_replicas,
        } => create_data_topic(
            c,
            &client,
            &name,
            partitions,
            replication_factor,
            min_insync_replicas,
        ),
        TopicAction::Create {
            replication_factor,
            min_insync_replicas,
        } => {
            let before = client.describe_topic().map_err(Failure::transport)?;
            let brokers = i32::try_from(before.brokers.max(1)).unwrap_or(1);
            let rf = replication_factor.unwrap_or(brokers.min(3));
            let min_isr = min_insync_replicas.or((rf >= 2).then_some(2));
            let created = match client.create_topic(rf, min_isr) {
                Ok(created) => created,
                // The topic exists but is wrong: report what is wrong.
                Err(e)
                    if e.kind() == kafka_coordination::error::ErrorKind::Config
                        && before.exists =>
                {
                    false
                }
                Err(e) => return Err(Failure::transport(e)),
            };
            let report = client.describe_topic().map_err(Failure::transport)?;
            Ok(print_report(
                c,
                &report,
                client.config().partitions(),
                false,
                Some(created),
            ))
        }
    }
}

/// `topic create-data`: the program's own topic, created unless it exists with that count.
fn create_data_topic(
    c: &Connection,
    client: &kafka_coordination::kafka::KafkaTransport,
    name: &str,
    partitions: i32,
    replication_factor: Option<i32>,
    min_insync_replicas: Option<i32>,
) -> Result<ExitCode, Failure> {
    if name == client.config().topic() {
        return Err(Failure::usage(format!(
            "{} is the state topic; create it with `kafka-coordination topic create` (compacted)",
            escaped(name)
        )));
    }
    let rf = match replication_factor {
        Some(rf) => rf,
        None => {
            let brokers = client.describe_topic().map_err(Failure::transport)?.brokers;
            i32::try_from(brokers.max(1)).unwrap_or(1).min(3)
        }
    };
    let min_isr = min_insync_replicas.or((rf >= 2).then_some(2));
    let (created, count) = client
        .create_data_topic(name, partitions, rf, min_isr)
        .map_err(Failure::transport)?;
    if c.json {
        println!(
            "{}",
            json!({ "topic": name, "created": created, "partitions": count, "ok": count == partitions })
        );
    } else if created {
        println!("topic {name}: created, {count} partition(s), replication factor {rf}");
    } else {
        println!("topic {name}: already exists, {count} partition(s)");
    }
    if count != partitions {
        return Err(Failure::failed(format!(
            "topic {name} exists with {count} partition(s), not {partitions}; use its count, or \
             delete the topic and create it again"
        )));
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::topic_name_error;

    #[test]
    fn a_topic_name_is_checked_against_kafkas_rule() {
        for good in ["jobs", "a.b_c-1", &"x".repeat(249)] {
            assert_eq!(topic_name_error(good), None, "{good}");
        }
        for (bad, says) in [
            ("", "not a topic name"),
            ("..", "not a topic name"),
            ("my jobs", "the character ' '"),
            ("jobs/1", "the character '/'"),
            (&"x".repeat(250), "250 characters"),
        ] {
            let e = topic_name_error(bad).unwrap_or_else(|| panic!("{bad:?} accepted"));
            assert!(e.contains(says), "{bad:?}: {e}");
        }
    }
}
