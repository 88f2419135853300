//! `fleet status` and `fleet drain`: a fleet (the library's `fleet` module) seen from the
//! shell, and a member asked to drain through the fleet's topic.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Subcommand};
use kafka_coordination::core::record::Role;
use kafka_coordination::core::UnixMillis;
use kafka_coordination::fleet::{
    self as lib, FleetError, FleetStatus, MemberStatus, ObservedMember, RoleStatus,
};
use kafka_coordination::kafka::KafkaTransport;
use kafka_coordination::options::{parse_duration, TimingSettings};
use kafka_coordination::watch::{roles, LeaseTracker};
use kafka_coordination::{Options, Timing};
use serde_json::{json, Value};

use super::failure::Failure;
use super::output::{escaped, relative, time};
use super::settings::Connection;

/// The fleet topic's default name.
const FLEET_TOPIC: &str = "__coordination_fleet";

#[derive(Subcommand, Debug)]
pub enum FleetAction {
    /// The fleet's members (live or not, weight, version, ready, draining, policy, how many
    /// roles each leads and is the preferred owner of) and its roles: how many are led, in
    /// motion (vacant, or led by another member than the preferred one) and vacant.
    Status(StatusArgs),
    /// Ask a live member to drain (hand every role it leads to another member and take none),
    /// through the fleet topic. Returns once the request is written; follow the drain with
    /// `fleet status`.
    Drain(DrainArgs),
}

/// Which fleet.
#[derive(Args, Debug)]
pub struct Which {
    /// The fleet's name (as its members join it).
    #[arg(long, value_name = "NAME")]
    fleet: String,
    /// The fleet's topic, where its members' heartbeats and announcements are.
    #[arg(long, default_value = FLEET_TOPIC, value_name = "TOPIC")]
    fleet_topic: String,
}

#[derive(Args, Debug)]
pub struct StatusArgs {
    #[command(flatten)]
    which: Which,
    /// Also list every role in motion, with its leader and its preferred owner.
    #[arg(long)]
    roles: bool,
    #[command(flatten)]
    timing: MemberTiming,
}

/// The fleet members' timing, which decides who is live.
#[derive(Args, Debug)]
pub struct MemberTiming {
    /// The members' lease duration (default 30s, or the file's timing.lease_duration): with the
    /// renew interval, it decides who is live.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION", requires = "fleet")]
    lease_duration: Option<Duration>,
    /// The members' renew interval (default 10s, or the file's timing.renew_interval): a member
    /// is live while its heartbeat was renewed within one and a half of them.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION", requires = "fleet")]
    renew_interval: Option<Duration>,
}

/// A fleet whose preferred owners `roles` shows beside each role's leader.
#[derive(Args, Debug)]
pub struct RolesFleet {
    /// Also show, for each role of this fleet, the member the fleet prefers as its leader and
    /// whether the role is in motion (vacant, or led by another member than the preferred one),
    /// as `fleet status` computes them.
    #[arg(long, value_name = "NAME")]
    fleet: Option<String>,
    /// The fleet's topic (with --fleet).
    #[arg(long, default_value = FLEET_TOPIC, value_name = "TOPIC", requires = "fleet")]
    fleet_topic: String,
    #[command(flatten)]
    timing: MemberTiming,
}

/// What `roles --fleet` adds to a role: its preferred owner, and whether it is in motion.
pub struct Preference {
    pub preferred: Option<String>,
    pub in_motion: bool,
}

impl RolesFleet {
    /// The fleet to compare against, its name and the members' timing checked (no request
    /// yet); `None` without `--fleet`.
    pub fn checked(&self, c: &Connection) -> Result<Option<FleetView>, Failure> {
        let Some(fleet) = &self.fleet else {
            return Ok(None);
        };
        check_name("fleet name", fleet)?;
        Ok(Some(FleetView {
            which: Which {
                fleet: fleet.clone(),
                fleet_topic: self.fleet_topic.clone(),
            },
            timing: member_timing(c, &self.timing)?,
        }))
    }
}

/// A fleet, checked, as `roles --fleet` reads it.
pub struct FleetView {
    which: Which,
    timing: Timing,
}

impl FleetView {
    /// The fleet's name.
    pub fn name(&self) -> &str {
        &self.which.fleet
    }

    /// For each role of the fleet, its preferred owner, from the fleet's members and `found`,
    /// the roles of the state topic.
    pub fn preferences(
        &self,
        c: &Connection,
        found: &[LeaseTracker],
        now: UnixMillis,
    ) -> Result<std::collections::HashMap<String, Preference>, Failure> {
        let members = read_members(c, &self.which, &self.timing, now)?;
        let s = lib::status(&members, found, now);
        Ok(s.roles
            .into_iter()
            .map(|r| {
                (
                    r.role,
                    Preference {
                        preferred: r.preferred,
                        in_motion: r.in_motion,
                    },
                )
            })
            .collect())
    }
}

/// The members' timing: the flags over the settings file's over the defaults.
fn member_timing(c: &Connection, t: &MemberTiming) -> Result<Timing, Failure> {
    let (_, file_timing) = c.settings()?;
    let flags = TimingSettings {
        lease_duration: t.lease_duration,
        renew_interval: t.renew_interval,
        ..TimingSettings::default()
    };
    file_timing
        .merge(flags)
        .apply(Options::new())
        .timing_value()
        .validate()
        .map_err(Failure::usage)
}

/// The fleet's members as its topic holds them.
fn read_members(
    c: &Connection,
    which: &Which,
    timing: &Timing,
    now: UnixMillis,
) -> Result<Vec<ObservedMember>, Failure> {
    let fleet_client = fleet_client(c, which, false)?;
    lib::members(&fleet_client, &which.fleet, timing, now)
        .map_err(|e| Failure::from_error(e).context(format!("reading {}", which.fleet_topic)))
}

#[derive(Args, Debug)]
pub struct DrainArgs {
    #[command(flatten)]
    which: Which,
    /// The member to drain.
    #[arg(long, value_name = "MEMBER")]
    member: String,
}

pub fn fleet(c: &Connection, action: FleetAction) -> Result<ExitCode, Failure> {
    match action {
        FleetAction::Status(args) => status(c, &args),
        FleetAction::Drain(args) => drain(c, &args),
    }
}

/// A fleet or member name as the members accept it: not empty, no `/`, and short enough for
/// the fleet's role names.
fn check_name(what: &str, name: &str) -> Result<(), Failure> {
    if name.is_empty() || name.contains('/') {
        return Err(Failure::usage(format!(
            "the {what} '{}' is empty or holds a '/': fleet and member names cannot",
            escaped(name)
        )));
    }
    Ok(())
}

fn check_names(fleet: &str, member: &str) -> Result<(), Failure> {
    check_name("fleet name", fleet)?;
    check_name("member", member)?;
    Role::new(lib::drain_role(fleet, member)).map_err(|e| {
        Failure::usage(format!(
            "fleet {} and member {} make a role name that is too long: {e}",
            escaped(fleet),
            escaped(member)
        ))
    })?;
    Ok(())
}

fn fleet_failure(e: FleetError) -> Failure {
    match e {
        FleetError::Start(e) => Failure::from_error(e),
        e @ FleetError::InvalidName { .. } => Failure::usage(e),
        e => Failure::failed(e),
    }
}

/// A client on the fleet's topic.
fn fleet_client(c: &Connection, which: &Which, warn: bool) -> Result<KafkaTransport, Failure> {
    let config = c.kafka_config_on(&which.fleet_topic, warn)?;
    KafkaTransport::connect(config).map_err(Failure::transport)
}

/// The word for a member's liveness: `live`, or why not.
fn state(m: &ObservedMember, now: UnixMillis) -> &'static str {
    match &m.heartbeat {
        _ if m.live => "live",
        None => "left",
        Some(h) if !h.is_live(now) => "expired",
        Some(_) if m.announcement.is_none() => "unannounced",
        Some(_) => "stale",
    }
}

fn member_json(m: &MemberStatus, now: UnixMillis) -> Value {
    let o = &m.member;
    let a = o.announcement.as_ref();
    json!({
        "member": o.member,
        "live": o.live,
        "state": state(o, now),
        "heartbeat_until_ms": o.heartbeat.as_ref().map(|h| h.deadline.0),
        "announced": a.is_some(),
        "weight": a.map(|a| a.weight),
        "version": a.and_then(|a| a.version.as_ref()).map(|v| v.as_str()),
        "ready": a.map(|a| a.ready),
        "draining": a.map(|a| a.draining),
        "policy": a.map(|a| a.policy.as_str()),
        "leads": m.leads,
        "preferred": m.preferred,
    })
}

fn role_json(r: &RoleStatus) -> Value {
    json!({
        "role": r.role,
        "leader": r.leader,
        "preferred": r.preferred,
        "vacant": r.is_vacant(),
    })
}

fn status(c: &Connection, args: &StatusArgs) -> Result<ExitCode, Failure> {
    let which = &args.which;
    check_name("fleet name", &which.fleet)?;
    let timing = member_timing(c, &args.timing)?;
    let state_client = c.connect()?;
    let now = kafka_coordination::Clock::now(&kafka_coordination::SystemClock);
    let members = read_members(c, which, &timing, now)?;
    let found = roles(&state_client).map_err(Failure::from_error)?;
    let s = lib::status(&members, &found, now);
    if c.json {
        print_json(args, &timing, &s, now);
    } else {
        print_text(args, &s, now);
    }
    Ok(ExitCode::SUCCESS)
}

fn print_json(args: &StatusArgs, timing: &Timing, s: &FleetStatus, now: UnixMillis) {
    let mut v = json!({
        "fleet": args.which.fleet,
        "fleet_topic": args.which.fleet_topic,
        "lease_duration_ms": timing.lease_duration.as_millis(),
        "renew_interval_ms": timing.renew_interval.as_millis(),
        "policy": s.policy.map(|p| p.as_str()),
        "policy_conflict": s.policy_conflict,
        "bounded": s.bounded,
        "members": s.members.iter().map(|m| member_json(m, now)).collect::<Vec<_>>(),
        "live_members": s.live(),
        "roles": s.roles.len(),
        "led": s.led(),
        "in_motion": s.in_motion(),
        "vacant": s.vacant(),
    });
    if args.roles {
        v["roles_in_motion"] = s
            .roles
            .iter()
            .filter(|r| r.in_motion)
            .map(role_json)
            .collect::<Vec<_>>()
            .into();
    }
    println!("{v}");
}

/// Columns padded to their widest cell (names escaped first).
fn table(header: &[&str], rows: &[Vec<String>], right: &[bool]) {
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            rows.iter()
                .map(|r| r[i].chars().count())
                .chain(std::iter::once(header[i].len()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: Vec<&str>| {
        let parts: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, cell)| {
                let w = widths[i];
                if right.get(i).copied().unwrap_or(false) {
                    format!("{cell:>w$}")
                } else {
                    format!("{cell:<w$}")
                }
            })
            .collect();
        println!("{}", parts.join("  ").trim_end());
    };
    line(header.to_vec());
    for r in rows {
        line(r.iter().map(String::as_str).collect());
    }
}

fn print_text(args: &StatusArgs, s: &FleetStatus, now: UnixMillis) {
    let which = &args.which;
    let how = match (s.policy, s.policy_conflict) {
        (_, true) => "the live members announce different policies: no role moves for \
                      preference"
            .to_owned(),
        (None, false) => "no live member".to_owned(),
        (Some(p), false) if s.bounded => format!("policy {p}, bounded loads"),
        (Some(p), false) => format!(
            "policy {p}, rendezvous alone (the members do not all announce the roles listed \
             here)"
        ),
    };
    println!(
        "fleet {} (topic {}): {} of {} member(s) live; {how}",
        escaped(&which.fleet),
        escaped(&which.fleet_topic),
        s.live(),
        s.members.len()
    );
    if s.members.is_empty() {
        println!(
            "no member of fleet {} in topic {}",
            escaped(&which.fleet),
            escaped(&which.fleet_topic)
        );
    } else {
        let yes_no = |b: Option<bool>| match b {
            Some(true) => "yes",
            Some(false) => "no",
            None => "-",
        };
        let rows: Vec<Vec<String>> = s
            .members
            .iter()
            .map(|m| {
                let o = &m.member;
                let a = o.announcement.as_ref();
                let live = match state(o, now) {
                    "live" => "yes",
                    other => other,
                };
                vec![
                    escaped(&o.member).into_owned(),
                    live.to_owned(),
                    a.map_or_else(|| "-".to_owned(), |a| a.weight.to_string()),
                    a.and_then(|a| a.version.as_ref())
                        .map_or_else(|| "-".to_owned(), |v| escaped(v.as_str()).into_owned()),
                    yes_no(a.map(|a| a.ready)).to_owned(),
                    yes_no(a.map(|a| a.draining)).to_owned(),
                    a.map_or("-", |a| a.policy.as_str()).to_owned(),
                    m.leads.to_string(),
                    m.preferred.to_string(),
                ]
            })
            .collect();
        table(
            &[
                "MEMBER",
                "LIVE",
                "WEIGHT",
                "VERSION",
                "READY",
                "DRAINING",
                "POLICY",
                "LEADS",
                "PREFERRED",
            ],
            &rows,
            &[false, false, true, false, false, false, false, true, true],
        );
        if s.members.iter().any(|m| state(&m.member, now) == "stale") {
            println!(
                "stale: the heartbeat lease runs, but was not renewed within 1.5 renew \
                 intervals (by the member's announced timing; for a member that announces none, \
                 pass its --lease-duration and --renew-interval)"
            );
        }
        let stale_leaders: Vec<String> = s
            .members
            .iter()
            .filter(|m| !m.member.live && m.member.lease_running(now))
            .filter_map(|m| m.member.heartbeat.as_ref().map(|h| (m, h)))
            .map(|(m, h)| {
                format!(
                    "{} (lease until {}, {})",
                    escaped(&m.member.member),
                    time(h.deadline),
                    relative(h.deadline, now)
                )
            })
            .collect();
        if !stale_leaders.is_empty() {
            println!("not live, lease running: {}", stale_leaders.join(", "));
        }
    }
    println!(
        "roles {}, led {}, in motion {}, vacant {}",
        s.roles.len(),
        s.led(),
        s.in_motion(),
        s.vacant()
    );
    if args.roles {
        let rows: Vec<Vec<String>> = s
            .roles
            .iter()
            .filter(|r| r.in_motion)
            .map(|r| {
                let name = |m: &Option<String>| {
                    m.as_deref()
                        .map_or_else(|| "-".to_owned(), |m| escaped(m).into_owned())
                };
                vec![
                    escaped(&r.role).into_owned(),
                    name(&r.leader),
                    name(&r.preferred),
                ]
            })
            .collect();
        if rows.is_empty() {
            println!("no role in motion");
        } else {
            table(&["ROLE", "LEADER", "PREFERRED"], &rows, &[]);
        }
    }
}

fn drain(c: &Connection, args: &DrainArgs) -> Result<ExitCode, Failure> {
    let which = &args.which;
    check_names(&which.fleet, &args.member)?;
    let (_, file_timing) = c.settings()?;
    let options = file_timing.apply(Options::new());
    let client = Arc::new(fleet_client(c, which, true)?);
    let now = kafka_coordination::Clock::now(&kafka_coordination::SystemClock);
    let members = lib::members(&*client, &which.fleet, &options.timing_value(), now)
        .map_err(|e| Failure::from_error(e).context(format!("reading {}", which.fleet_topic)))?;
    // A member honours only requests made after it joined: one for a member that is not
    // running would be ignored by it, and by the next process that joins under its name.
    let Some(target) = members
        .iter()
        .find(|m| m.member == args.member && m.lease_running(now))
    else {
        let running: Vec<String> = members
            .iter()
            .filter(|m| m.lease_running(now))
            .map(|m| escaped(&m.member).into_owned())
            .collect();
        return Err(Failure::failed(format!(
            "member {} of fleet {} has no running heartbeat in topic {}, so it would ignore a \
             drain request (members with one: {})",
            escaped(&args.member),
            escaped(&which.fleet),
            escaped(&which.fleet_topic),
            if running.is_empty() {
                "none".to_owned()
            } else {
                running.join(", ")
            }
        )));
    };
    let was_draining = target.draining();
    let requester = format!("kafka-coordination-{}", std::process::id());
    lib::request_drain(client, &which.fleet, &args.member, &requester, options)
        .map_err(fleet_failure)?;
    if c.json {
        println!(
            "{}",
            json!({
                "fleet": which.fleet,
                "fleet_topic": which.fleet_topic,
                "member": args.member,
                "requested": true,
                "requester": requester,
                "was_draining": was_draining,
            })
        );
    } else {
        println!(
            "asked member {} of fleet {} to drain (a request in topic {}, as {requester}){}: it \
             hands the roles it leads to the other members and takes none; follow it with \
             `kafka-coordination fleet status --fleet {}`",
            escaped(&args.member),
            escaped(&which.fleet),
            escaped(&which.fleet_topic),
            if was_draining {
                ", though it already announces that it drains"
            } else {
                ""
            },
            escaped(&which.fleet),
        );
    }
    Ok(ExitCode::SUCCESS)
}
