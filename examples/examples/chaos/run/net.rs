//! Network faults (`run --net-faults N`, from `scripts/chaos-net.sh`): every broker and every
//! member process runs in a network namespace of its own on one bridge, and a fault is a set of
//! nftables drop rules in some of those namespaces, healed after a seeded hold.
//!
//! Names and addresses (the script that sets up the bridge uses the same):
//! broker node N: namespace `kcn-bN`, address 10.77.0.(10+N); member process instance I:
//! namespace `kcn-mI`, address 10.77.1.I (I at most 250); the orchestrator: 10.77.0.1 on the
//! bridge `kcnbr0`, in the root namespace.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use kafka_coordination::core::partition::role_partition;
use kafka_coordination::core::record::Role;

use crate::format::Pair;
use crate::kafka;
use crate::liveness::FaultKind;

use super::proxy::Slow;
use super::Orchestrator;

pub const BRIDGE: &str = "kcnbr0";

pub fn broker_ns(node: i32) -> String {
    format!("kcn-b{node}")
}

pub fn broker_addr(node: i32) -> String {
    format!("10.77.0.{}", 10 + node)
}

pub fn member_ns(instance: u64) -> String {
    format!("kcn-m{instance}")
}

fn member_addr(instance: u64) -> String {
    format!("10.77.1.{instance}")
}

fn run_cmd(program: &str, args: &[&str], input: Option<&str>) -> Result<(), String> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{program} {}: {e}", args.join(" ")))?;
    if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
        stdin
            .write_all(text.as_bytes())
            .map_err(|e| format!("{program} {}: {e}", args.join(" ")))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("{program} {}: {e}", args.join(" ")))?;
    if !out.status.success() {
        return Err(format!(
            "{program} {} failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

/// The nftables table every namespace gets: empty input and output filter chains, where a
/// fault adds its drop rules and a heal flushes them.
/// The output chain runs before the proxy's DNAT (priority -100) and the input chain after
/// the reply's source is translated back (100), so both see the broker's own address.
const TABLE: &str = "table inet kcn {\n  chain input { type filter hook input priority 200; }\n  \
                     chain output { type filter hook output priority -200; }\n}\n";

/// Creates the namespace of a member process: a veth pair to the bridge, its address, the
/// empty nftables table, and the DNAT rules that send its connections to each broker
/// (`broker`, `host:port`) through the proxy's port for it.
pub fn add_member_ns(instance: u64, proxied: &[(String, u16)]) -> Result<(), String> {
    if instance > 250 {
        return Err(format!(
            "member instance {instance}: the network mode has addresses for 250 member processes"
        ));
    }
    let ns = member_ns(instance);
    let veth = format!("kcnvm{instance}");
    let _ = run_cmd("ip", &["netns", "del", &ns], None);
    run_cmd("ip", &["netns", "add", &ns], None)?;
    run_cmd(
        "ip",
        &[
            "link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns", &ns,
        ],
        None,
    )?;
    run_cmd("ip", &["link", "set", &veth, "master", BRIDGE, "up"], None)?;
    let addr = format!("{}/16", member_addr(instance));
    run_cmd(
        "ip",
        &["-n", &ns, "addr", "add", &addr, "dev", "eth0"],
        None,
    )?;
    run_cmd("ip", &["-n", &ns, "link", "set", "eth0", "up"], None)?;
    run_cmd("ip", &["-n", &ns, "link", "set", "lo", "up"], None)?;
    let mut script = TABLE.to_owned();
    script.push_str("table ip kcnat {\n  chain out { type nat hook output priority -100;\n");
    for (broker, port) in proxied {
        let (host, bport) = broker
            .rsplit_once(':')
            .ok_or_else(|| format!("`{broker}` is not host:port"))?;
        script.push_str(&format!(
            "    ip daddr {host} tcp dport {bport} dnat to {PROXY_IP}:{port}\n"
        ));
    }
    script.push_str("  }\n}\n");
    run_cmd(
        "ip",
        &["netns", "exec", &ns, "nft", "-f", "-"],
        Some(&script),
    )
}

/// The orchestrator's address on the bridge, where the proxy listens.
pub const PROXY_IP: &str = "10.77.0.1";

/// Which way a cut drops packets, seen from the namespace that holds the rules.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Way {
    Both,
    /// Only what the namespace sends to the peers.
    Out,
    /// Only what the namespace receives from the peers.
    In,
}

/// The controller quorum's leader, from the nodes' `quorum-state` files (the one with the
/// largest leader epoch).
fn quorum_leader() -> Result<i32, String> {
    let run_dir = PathBuf::from(
        std::env::var("KAFKA_RUN_DIR").map_err(|_| "KAFKA_RUN_DIR is not set".to_owned())?,
    );
    let mut best: Option<(i64, i32)> = None;
    for n in 1..=3 {
        let path = run_dir.join(format!("node-{n}/data/__cluster_metadata-0/quorum-state"));
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let field = |name: &str| -> Option<i64> {
            let at = text.find(&format!("\"{name}\":"))? + name.len() + 3;
            let rest = &text[at..];
            let end = rest
                .find(|c: char| c != '-' && !c.is_ascii_digit())
                .unwrap_or(rest.len());
            rest[..end].parse().ok()
        };
        if let (Some(leader), Some(epoch)) = (field("leaderId"), field("leaderEpoch")) {
            if leader > 0 && best.is_none_or(|(e, _)| epoch > e) {
                best = Some((epoch, leader as i32));
            }
        }
    }
    best.map(|(_, l)| l)
        .ok_or_else(|| "no node's quorum-state names a controller leader".to_owned())
}

impl Orchestrator {
    /// The command that starts a member process: in a namespace of its own in network mode.
    pub(super) fn member_command(&self, exe: PathBuf, instance: u64) -> Result<Command, String> {
        if self.args.net_faults == 0 {
            return Ok(Command::new(exe));
        }
        add_member_ns(instance, &self.proxied)?;
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &member_ns(instance)]).arg(exe);
        Ok(c)
    }

    /// Adds drop rules to `ns` for `peers` (addresses), `way`.
    fn cut(&mut self, ns: &str, peers: &[String], way: Way) -> Result<(), String> {
        let set = peers.join(", ");
        let mut script = String::new();
        if way != Way::In {
            script.push_str(&format!(
                "add rule inet kcn output ip daddr {{ {set} }} drop\n"
            ));
        }
        if way != Way::Out {
            script.push_str(&format!(
                "add rule inet kcn input ip saddr {{ {set} }} drop\n"
            ));
        }
        run_cmd(
            "ip",
            &["netns", "exec", ns, "nft", "-f", "-"],
            Some(&script),
        )?;
        self.cut_ns.push(ns.to_owned());
        Ok(())
    }

    /// Removes every rule a fault added.
    fn heal(&mut self) -> Result<(), String> {
        self.proxy.clear();
        let mut result = Ok(());
        for ns in std::mem::take(&mut self.cut_ns) {
            if let Err(e) = run_cmd(
                "ip",
                &["netns", "exec", &ns, "nft", "flush", "table", "inet", "kcn"],
                None,
            ) {
                result = Err(e);
            }
        }
        result
    }

    pub(super) fn pick_net_kind(&mut self) -> FaultKind {
        const KINDS: [(FaultKind, usize); 12] = [
            (FaultKind::SlowLeader, 1),
            (FaultKind::StallLeader, 1),
            (FaultKind::CutLeaderFromCoordinator, 2),
            (FaultKind::CutLeaderFromStateLeader, 2),
            (FaultKind::CutLeaderFromDataLeader, 1),
            (FaultKind::CutLeaderFromAll, 2),
            (FaultKind::CutLeaderOutbound, 1),
            (FaultKind::CutLeaderInbound, 1),
            (FaultKind::CutStandby, 1),
            (FaultKind::CutAllStandbys, 1),
            (FaultKind::IsolateBroker, 1),
            (FaultKind::IsolateQuorumLeader, 1),
        ];
        // The first faults take every kind once, in a seeded order, so that a short run
        // covers them all; later ones are drawn by weight.
        // Network faults only: clock faults, when asked for, come between them.
        let done = (self.faults as usize).saturating_sub(self.clocks.done);
        if done < KINDS.len() {
            if done == 0 {
                let mut order: Vec<usize> = (0..KINDS.len()).collect();
                for i in (1..order.len()).rev() {
                    order.swap(i, self.rng.below(i + 1));
                }
                self.net_order = order;
            }
            if let Some(&k) = self.net_order.get(done) {
                return KINDS[k].0;
            }
        }
        self.rng.weighted(&KINDS, FaultKind::CutLeaderFromAll)
    }

    /// One network fault: the cut, a seeded hold, the heal, and the wait for the roles to
    /// settle. Returns how many roles changed leader.
    pub(super) fn net_fault(&mut self, kind: FaultKind) -> Result<usize, String> {
        let index = self.rng.below(self.roles.len());
        let role = self.roles[index].clone();
        let md = kafka::metadata(&self.args.bootstrap)?;
        let all: Vec<i32> = vec![1, 2, 3];
        let state_leader = {
            let r = Role::new(role.clone()).map_err(|e| e.to_string())?;
            let p = role_partition(&r, self.args.partitions).map_err(|e| e.to_string())?;
            kafka::partition_leader(&md, &self.state_topic, p)
        };
        let terms: Vec<(String, i64)> = self
            .roles
            .iter()
            .map(|r| (r.clone(), self.leader_of(r).map_or(-1, |(_, _, t)| t)))
            .collect();
        let hold = self.rng.millis(self.args.lease * 2, self.args.lease * 5);
        // (namespace, peers, way) of each cut; the target process, the pairs it led.
        let mut cuts: Vec<(String, Vec<i32>, Way)> = Vec::new();
        let mut target = None;
        let mut led: Vec<(String, Pair)> = Vec::new();
        let mut instances: Vec<u64> = Vec::new();
        let mut slowed: Option<(String, Slow)> = None;
        if kind.at_leader() {
            let Some((i, _, _)) = self.leader_of(&role) else {
                return Ok(0);
            };
            let peers: Vec<i32> = match kind {
                FaultKind::CutLeaderFromCoordinator => {
                    kafka::coordinator_of(&md, &role).into_iter().collect()
                }
                FaultKind::CutLeaderFromStateLeader => state_leader.into_iter().collect(),
                FaultKind::CutLeaderFromDataLeader => {
                    kafka::partition_leader(&md, &self.data_topic, index as i32)
                        .into_iter()
                        .collect()
                }
                _ => all.clone(),
            };
            if peers.is_empty() {
                self.say(&format!("{}: no broker found; skipped", kind.name()));
                return Ok(0);
            }
            if matches!(kind, FaultKind::SlowLeader | FaultKind::StallLeader) {
                // The proxy slows what every broker sends to it, above the request timeout
                // (10 s by default), or holds it half-way through a response.
                let slow = if kind == FaultKind::SlowLeader {
                    Slow::Delay(Duration::from_secs(12))
                } else {
                    Slow::Stall
                };
                slowed = Some((member_addr(self.procs[i].instance), slow));
            }
            let way = match kind {
                FaultKind::CutLeaderOutbound => Way::Out,
                FaultKind::CutLeaderInbound => Way::In,
                _ => Way::Both,
            };
            cuts.push((member_ns(self.procs[i].instance), peers, way));
            target = Some(i);
            led = self.led_by(i).into_iter().map(|(r, p, _)| (r, p)).collect();
        } else if matches!(kind, FaultKind::CutStandby | FaultKind::CutAllStandbys) {
            let standbys = self.standbys();
            if standbys.is_empty() {
                return Ok(0);
            }
            let chosen = if kind == FaultKind::CutStandby {
                vec![standbys[self.rng.below(standbys.len())]]
            } else {
                standbys
            };
            for &i in &chosen {
                cuts.push((member_ns(self.procs[i].instance), all.clone(), Way::Both));
                instances.push(self.procs[i].instance);
            }
            if chosen.len() == 1 {
                target = Some(chosen[0]);
            }
        } else {
            let node = if kind == FaultKind::IsolateQuorumLeader {
                quorum_leader()?
            } else {
                all[self.rng.below(all.len())]
            };
            let others: Vec<i32> = all.iter().copied().filter(|n| *n != node).collect();
            cuts.push((broker_ns(node), others, Way::Both));
        }
        let nodes = cuts
            .iter()
            .map(|(ns, _, _)| ns.clone())
            .collect::<Vec<_>>()
            .join("+");
        let peers = if slowed.is_some() {
            "the-proxy".to_owned()
        } else {
            cuts.first()
                .map(|(_, p, _)| {
                    p.iter()
                        .map(|n| format!("b{n}"))
                        .collect::<Vec<_>>()
                        .join("+")
                })
                .unwrap_or_default()
        };
        let mut extra = vec![
            ("role", role.clone()),
            ("nodes", nodes.clone()),
            ("peers", peers.clone()),
            ("hold_ms", hold.as_millis().to_string()),
        ];
        if !instances.is_empty() {
            extra.push((
                "instances",
                instances
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(","),
            ));
        }
        self.fault_line(kind, target, &led, &extra)?;
        self.say(&format!(
            "#{} {} (role {}): {nodes} {} for {:.1} s{}",
            self.faults,
            kind.name(),
            self.short(&role),
            if slowed.is_some() {
                "slowed through the proxy".to_owned()
            } else {
                format!("cut from {peers}")
            },
            hold.as_secs_f64(),
            if led.is_empty() {
                String::new()
            } else {
                format!(
                    " (leads {})",
                    led.iter()
                        .map(|(r, p)| format!("{} {p}", self.short(r)))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        ));
        if let Some((addr, slow)) = slowed {
            let ip = addr
                .parse()
                .map_err(|e| format!("the address {addr}: {e}"))?;
            self.proxy.set(ip, slow);
            cuts.clear();
        }
        for (ns, peers, way) in &cuts {
            let addrs: Vec<String> = peers.iter().map(|n| broker_addr(*n)).collect();
            if let Err(e) = self.cut(ns, &addrs, *way) {
                let _ = self.heal();
                return Err(e);
            }
        }
        self.pause(hold);
        self.heal()?;
        let n = self.faults;
        self.record("HEAL", &[("n", n.to_string())])?;
        self.say(&format!("      healed #{n}"));
        let moved = terms
            .iter()
            .filter(|(r, t)| self.leader_of(r).is_some_and(|(_, _, term)| term > *t))
            .count();
        self.quiet();
        if moved > 0 {
            self.say(&format!(
                "      {moved} role(s) changed leader during the cut"
            ));
        }
        Ok(moved)
    }

    /// Drops every rule left (on an error path).
    pub(super) fn heal_all(&mut self) {
        let _ = self.heal();
    }
}
