//! The seeded faults: picking one, injecting it into a leader, a standby or a broker, and
//! waiting for the roles to settle after it.

use std::io::Write;
use std::process::Command;
use std::time::{Duration, Instant};

use kafka_coordination::core::partition::role_partition;
use kafka_coordination::core::record::Role;

use crate::format::Pair;
use crate::kafka;
use crate::liveness::FaultKind;

use super::Orchestrator;

impl Orchestrator {
    /// How long a failover may take at most before the run calls it stuck.
    pub(super) fn failover_bound(&self) -> Duration {
        let ranks = (self.procs.len() + self.ghosts.len()) as u32;
        self.args.lease * 2 + self.args.stagger * ranks + Duration::from_secs(30)
    }

    /// Restarts a killed member: under its own id, a new id (at most two ghosts on the
    /// roster) or a ghost's id (which replaces that ghost's registration).
    pub(super) fn restart(&mut self, killed: String) -> Result<(), String> {
        self.ghosts.push(killed.clone());
        let mut options = vec![killed.clone()];
        if self.ghosts.len() <= 2 {
            options.push(String::new());
        }
        options.extend(self.ghosts.iter().filter(|g| **g != killed).cloned());
        let pick = options.swap_remove(self.rng.below(options.len()));
        let id = if pick.is_empty() {
            self.new_member_id()
        } else {
            self.ghosts.retain(|g| *g != pick);
            pick
        };
        self.spawn(id)
    }

    pub(super) fn fault_line(
        &mut self,
        kind: FaultKind,
        target: Option<usize>,
        led: &[(String, Pair)],
        extra: &[(&str, String)],
    ) -> Result<(), String> {
        self.faults += 1;
        let mut fields = vec![
            ("n", self.faults.to_string()),
            ("kind", kind.name().to_owned()),
        ];
        if let Some(i) = target {
            fields.push(("instance", self.procs[i].instance.to_string()));
            fields.push(("member", self.procs[i].member.clone()));
        }
        let led_text = led
            .iter()
            .map(|(r, p)| format!("{r}:{p}"))
            .collect::<Vec<_>>()
            .join(",");
        fields.push((
            "led",
            if led_text.is_empty() {
                "-".to_owned()
            } else {
                led_text
            },
        ));
        fields.extend(extra.iter().cloned());
        self.record("FAULT", &fields)
    }

    pub(super) fn short(&self, role: &str) -> String {
        self.roles
            .iter()
            .position(|r| r == role)
            .map_or_else(|| role.to_owned(), |i| format!("r{i}"))
    }

    /// Waits until each (role, old term) has a leader with a larger term; returns how many do.
    pub(super) fn await_successors(&mut self, old: &[(String, i64)]) -> usize {
        let bound = self.failover_bound();
        let started = Instant::now();
        self.wait_for(bound, |o| {
            old.iter()
                .all(|(r, t)| o.leader_of(r).is_some_and(|(_, _, term)| term > *t))
        });
        let mut moved = 0;
        for (role, t) in old {
            match self.leader_of(role) {
                Some((i, pair, term)) if term > *t => {
                    moved += 1;
                    self.say(&format!(
                        "      {}: {} leads with {pair}, term {term} ({:.1} s after the fault)",
                        self.short(role),
                        self.procs[i].name(),
                        started.elapsed().as_secs_f64()
                    ));
                }
                _ => self.say(&format!(
                    "      {}: NO successor within {bound:?}",
                    self.short(role)
                )),
            }
        }
        moved
    }

    pub(super) fn pick_kind(&mut self) -> FaultKind {
        if let Some(kind) = self.clock_kind() {
            return kind;
        }
        if self.args.brokers >= 3
            && self.broker_kills < self.args.broker_kills
            && self.faults % 2 == 1
        {
            // Every other fault is a broker kill, the four kinds in turn.
            const KINDS: [FaultKind; 4] = [
                FaultKind::KillStateLeaderBroker,
                FaultKind::KillCoordinatorBroker,
                FaultKind::KillStateAndCoordinatorBrokers,
                FaultKind::KillDataLeaderBroker,
            ];
            return KINDS[self.broker_kills % KINDS.len()];
        }
        let mut weights = vec![
            (FaultKind::KillLeader, 3),
            (FaultKind::StopLeader, 2),
            (FaultKind::ResignLeader, 2),
            (FaultKind::KillStandby, 1),
            (FaultKind::StopStandby, 1),
        ];
        if self.args.brokers >= 3 {
            weights.extend([
                (FaultKind::KillStateLeaderBroker, 1),
                (FaultKind::KillDataLeaderBroker, 1),
                (FaultKind::KillCoordinatorBroker, 1),
            ]);
        }
        self.rng.weighted(&weights, FaultKind::KillLeader)
    }

    /// Injects faults until enough failovers happened; returns their count.
    pub(super) fn chaos(&mut self) -> Result<usize, String> {
        let mut failovers = 0;
        // The first elections of a cluster just started can overlap (a rank 1 member can mint
        // just after the rank 0 member was elected, while the cluster still creates its
        // transaction log): the first fault waits for them to be over, as every later fault
        // waits for the elections after the one before it.
        self.quiet();
        // Network mode counts network faults (clock faults, when asked for, come between them);
        // otherwise failovers and broker kills.
        let net = self.args.net_faults;
        while (net > 0 && (self.faults as usize).saturating_sub(self.clocks.done) < net)
            || (net == 0
                && (failovers < self.args.failovers || self.broker_kills < self.args.broker_kills))
            || self.clocks.done < self.args.clock_faults
        {
            if let Some(max) = self.args.max_seconds {
                if self.started.elapsed() >= Duration::from_secs(max) {
                    self.say(&format!(
                        "time bound of {max} s reached after {failovers} failovers"
                    ));
                    break;
                }
            }
            if !self.wait_for(Duration::from_secs(120), |o| o.unready().is_none()) {
                let why = self.unready().unwrap_or_default();
                self.say(&format!(
                    "not settled after 120 s ({why}); injecting anyway"
                ));
                self.record("STALL", &[("error", why)])?;
            }
            if let Some(kind) = self.clock_kind() {
                failovers += self.clock_fault(kind)?;
                continue;
            }
            if net > 0 {
                let kind = self.pick_net_kind();
                failovers += self.net_fault(kind)?;
                continue;
            }
            let kind = self.pick_kind();
            failovers += match kind {
                k if k.at_clock() => self.clock_fault(k)?,
                k if k.at_leader() => self.leader_fault(k)?,
                k if k.at_broker() => self.broker_fault(k)?,
                k => self.standby_fault(k)?,
            };
        }
        self.clock_report();
        Ok(failovers)
    }

    pub(super) fn leader_fault(&mut self, kind: FaultKind) -> Result<usize, String> {
        let role = self.roles[self.rng.below(self.roles.len())].clone();
        let Some((target, pair, term)) = self.leader_of(&role) else {
            return Ok(0);
        };
        // A kill or a stop ends every term the process holds; a resign only the one asked for.
        let led: Vec<(String, Pair, i64)> = if kind == FaultKind::ResignLeader {
            vec![(role.clone(), pair, term)]
        } else {
            self.led_by(target)
        };
        let pairs: Vec<(String, Pair)> = led.iter().map(|(r, p, _)| (r.clone(), *p)).collect();
        let old: Vec<(String, i64)> = led.iter().map(|(r, _, t)| (r.clone(), *t)).collect();
        let what = led
            .iter()
            .map(|(r, p, _)| format!("{} {p}", self.short(r)))
            .collect::<Vec<_>>()
            .join(", ");
        self.fault_line(kind, Some(target), &pairs, &[])?;
        self.say(&format!(
            "#{} {} {} (leads {what})",
            self.faults,
            kind.name(),
            self.procs[target].name()
        ));
        match kind {
            FaultKind::KillLeader => {
                self.sigkill(target);
                let moved = self.await_successors(&old);
                // Restarted at once, as a supervisor would; the quiet covers its start too.
                let killed = self.procs[target].member.clone();
                self.restart(killed)?;
                self.quiet();
                Ok(moved)
            }
            FaultKind::StopLeader => {
                self.signal(target, "STOP")?;
                self.procs[target].stopped = true;
                let moved = self.await_successors(&old);
                self.quiet();
                self.signal(target, "CONT")?;
                self.procs[target].stopped = false;
                self.record(
                    "CONT",
                    &[("instance", self.procs[target].instance.to_string())],
                )?;
                // The zombie learns it was fenced; what its other candidacies do comes before
                // the next fault.
                self.quiet();
                Ok(moved)
            }
            _ => {
                if let Some(stdin) = self.procs[target].stdin.as_mut() {
                    writeln!(stdin, "resign {role} {pair}")
                        .and_then(|_| stdin.flush())
                        .map_err(|e| {
                            format!("asking {} to resign: {e}", self.procs[target].name())
                        })?;
                }
                let moved = self.await_successors(&old);
                self.quiet();
                Ok(moved)
            }
        }
    }

    /// The processes that run (alive, not stopped) and lead no role.
    pub(super) fn standbys(&self) -> Vec<usize> {
        (0..self.procs.len())
            .filter(|&i| {
                let p = &self.procs[i];
                p.alive
                    && !p.stopped
                    && self
                        .roles
                        .iter()
                        .all(|r| self.leader_of(r).is_none_or(|(l, _, _)| l != i))
            })
            .collect()
    }

    pub(super) fn standby_fault(&mut self, kind: FaultKind) -> Result<usize, String> {
        let standbys = self.standbys();
        if standbys.is_empty() {
            return self.leader_fault(FaultKind::KillLeader);
        }
        let target = standbys[self.rng.below(standbys.len())];
        self.fault_line(kind, Some(target), &[], &[])?;
        self.say(&format!(
            "#{} {} {}",
            self.faults,
            kind.name(),
            self.procs[target].name()
        ));
        let before = self.elected.len();
        if kind == FaultKind::KillStandby {
            self.sigkill(target);
            let delay = self.rng.millis(Duration::ZERO, self.args.lease);
            self.pause(delay);
            let killed = self.procs[target].member.clone();
            self.restart(killed)?;
        } else {
            self.signal(target, "STOP")?;
            self.procs[target].stopped = true;
            let hold = self.rng.millis(self.args.lease / 2, self.args.lease * 2);
            self.pause(hold);
            self.signal(target, "CONT")?;
            self.procs[target].stopped = false;
            self.record(
                "CONT",
                &[("instance", self.procs[target].instance.to_string())],
            )?;
        }
        self.quiet();
        if self.elected.len() > before {
            self.say(&format!(
                "      {} election(s) although no leader was hit",
                self.elected.len() - before
            ));
        }
        Ok(0)
    }

    pub(super) fn broker_fault(&mut self, kind: FaultKind) -> Result<usize, String> {
        let index = self.rng.below(self.roles.len());
        let role = self.roles[index].clone();
        let md = kafka::metadata(&self.args.bootstrap)?;
        let state_leader = || -> Result<Option<i32>, String> {
            let r = Role::new(role.clone()).map_err(|e| e.to_string())?;
            let p = role_partition(&r, self.args.partitions).map_err(|e| e.to_string())?;
            Ok(kafka::partition_leader(&md, &self.state_topic, p))
        };
        let mut nodes: Vec<i32> = match kind {
            FaultKind::KillStateLeaderBroker => state_leader()?.into_iter().collect(),
            FaultKind::KillDataLeaderBroker => {
                kafka::partition_leader(&md, &self.data_topic, index as i32)
                    .into_iter()
                    .collect()
            }
            FaultKind::KillStateAndCoordinatorBrokers => state_leader()?
                .into_iter()
                .chain(kafka::coordinator_of(&md, &role))
                .collect(),
            _ => kafka::coordinator_of(&md, &role).into_iter().collect(),
        };
        nodes.dedup();
        let node = (!nodes.is_empty()).then(|| {
            nodes
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("+")
        });
        let Some(node) = node else {
            self.say(&format!(
                "{}: no broker found for {}; skipped",
                kind.name(),
                self.short(&role)
            ));
            return Ok(0);
        };
        let terms: Vec<(String, i64)> = self
            .roles
            .iter()
            .map(|r| (r.clone(), self.leader_of(r).map_or(-1, |(_, _, t)| t)))
            .collect();
        self.fault_line(
            kind,
            None,
            &[],
            &[("broker", node.to_string()), ("role", role.clone())],
        )?;
        self.say(&format!(
            "#{} {} (role {}): broker {node}",
            self.faults,
            kind.name(),
            self.short(&role)
        ));
        self.broker_kills += 1;
        for n in &nodes {
            self.node_script("stop-node.sh", &["--kill", &n.to_string()])?;
        }
        let down = self.rng.millis(
            Duration::from_secs(1),
            self.args.lease * 2 + Duration::from_secs(2),
        );
        self.pause(down);
        for n in &nodes {
            self.node_script("start-node.sh", &[&n.to_string()])?;
        }
        self.record("BROKER_STARTED", &[("broker", node.clone())])?;
        let topics = [
            self.state_topic.clone(),
            self.data_topic.clone(),
            "__transaction_state".to_owned(),
        ];
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            let md = kafka::metadata(&self.args.bootstrap);
            let refs: Vec<&str> = topics.iter().map(String::as_str).collect();
            if md.is_ok_and(|md| kafka::fully_replicated(&md, &refs, self.args.brokers)) {
                break;
            }
            if Instant::now() >= deadline {
                self.say(
                    "the restarted broker did not rejoin every in-sync replica set within 180 s",
                );
                break;
            }
            self.pause(Duration::from_millis(500));
        }
        self.quiet();
        let moved = terms
            .iter()
            .filter(|(r, t)| self.leader_of(r).is_some_and(|(_, _, term)| term > *t))
            .count();
        if moved > 0 {
            self.say(&format!("      {moved} role(s) changed leader"));
        }
        Ok(moved)
    }

    pub(super) fn node_script(&self, script: &str, args: &[&str]) -> Result<(), String> {
        let path = self.args.scripts.join(script);
        let status = Command::new(&path)
            .args(args)
            .status()
            .map_err(|e| format!("{}: {e}", path.display()))?;
        if !status.success() {
            return Err(format!(
                "{} {} failed: {status}",
                path.display(),
                args.join(" ")
            ));
        }
        Ok(())
    }
}
