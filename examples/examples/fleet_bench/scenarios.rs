//! The scenarios, run in order on one set of member processes:
//!
//! * **settle**: `--members` members start; every role led, shares within `--tolerance` of
//!   R/n, the time it took, the hand-overs it took;
//! * **kill**: the last member is SIGKILLed; per role it led, the time from the kill to the
//!   next `LEAD` (target: p99 within lease + 1 s of the kill); the survivors' shares once
//!   settled (within `--kill-tolerance` of R/(n-1));
//! * **restart**: the killed member starts again; the time until it has its share back
//!   (target: two leases after its `READY`), the longest vacancy of a moved role (target:
//!   `--handover-ms` + 50 ms), the most roles in motion at once;
//! * **scale**: a member joins (shares within the tolerance of R/(n+1)), then the first
//!   member drains on SIGTERM (it leads nothing, exits 0; shares of R/n);
//! * **upgrade**: every member in turn drains, exits and starts again with
//!   `--upgrade-version` and `--upgrade-policy`; at the end every role is led by a member of
//!   that version; the longest vacancy per hand-over and per role.
//!
//! After the last scenario every member is drained, and the safety check runs over the whole
//! run: no `LEAD` of a role while another process's term of it had not ended, unless that
//! term was later reported fenced (a violation otherwise; a term of a killed process is an
//! overlapping report, not a violation).

use std::time::{Duration, Instant};

use crate::analysis::{self, quantile, Window};
use crate::events::EndReason;
use crate::leases::LeaseReader;
use crate::ledger::Ledger;
use crate::members::{now_ms, Members, Spec};
use crate::report::{ms, since, Report};

/// Which scenarios run (settle always does: it starts the members).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scenarios {
    pub kill: bool,
    pub restart: bool,
    pub scale: bool,
    pub upgrade: bool,
}

impl Scenarios {
    pub const ALL: Scenarios = Scenarios {
        kill: true,
        restart: true,
        scale: true,
        upgrade: true,
    };

    /// `settle,kill,restart,scale,upgrade` (or letters `a`..`e`, or `all`).
    pub fn parse(list: &str) -> Result<Scenarios, String> {
        let mut s = Scenarios {
            kill: false,
            restart: false,
            scale: false,
            upgrade: false,
        };
        for word in list.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            match word {
                "all" => s = Scenarios::ALL,
                "a" | "settle" => {}
                "b" | "kill" => s.kill = true,
                "c" | "restart" => s.restart = true,
                "d" | "scale" => s.scale = true,
                "e" | "upgrade" => s.upgrade = true,
                other => {
                    return Err(format!(
                        "--scenarios: unknown scenario `{other}` (settle, kill, restart, scale, \
                         upgrade, or a..e, or all)"
                    ))
                }
            }
        }
        if s.restart && !s.kill {
            return Err("--scenarios: restart starts the member that kill killed: add kill".into());
        }
        Ok(s)
    }
}

/// What a run does.
#[derive(Clone, Debug)]
pub struct Config {
    pub roles: usize,
    pub members: usize,
    pub scenarios: Scenarios,
    pub lease_ms: i64,
    pub renew_ms: i64,
    pub policy: String,
    pub upgrade_policy: String,
    pub upgrade_version: u32,
    pub settle_timeout: Duration,
    pub quiet_ms: i64,
    pub tolerance: f64,
    pub kill_tolerance: f64,
    pub handover_ms: i64,
    /// Reads the killed member's lease deadlines from the state topic (`--cli`).
    pub leases: Option<LeaseReader>,
}

/// When the roles settled after a change.
#[derive(Clone, Copy, Debug, Default)]
struct Settled {
    /// The first instant every role was led.
    all_led: Option<i64>,
    /// The first instant every role was led and every share was within the tolerance.
    balanced: Option<i64>,
    /// The last change before a quiet period with every role led (`None`: timed out).
    settled: Option<i64>,
    /// The first instant the caller's mark held.
    marked: Option<i64>,
}

/// One run: the ledger, the processes, the report.
pub struct Bench {
    cfg: Config,
    pub ledger: Ledger,
    pub members: Members,
    pub report: Report,
    pub started: i64,
}

impl Bench {
    pub fn new(cfg: Config, ledger: Ledger, members: Members) -> Bench {
        Bench {
            cfg,
            ledger,
            members,
            report: Report::default(),
            started: now_ms(),
        }
    }

    fn say(&self, message: &str) {
        println!(
            "[{:>7.1}s] {message}",
            (now_ms() - self.started) as f64 / 1000.0
        );
    }

    fn spawn(&mut self, member: &str, version: u32, policy: &str) -> Result<usize, String> {
        let spec = Spec {
            member: member.to_owned(),
            version,
            policy: policy.to_owned(),
        };
        let p = self.members.spawn(&mut self.ledger, &spec)?;
        self.say(&format!(
            "started {} (version {version}, policy {policy})",
            self.ledger.label(p)
        ));
        Ok(p)
    }

    /// Reads events until `done` holds (`Some(now)`) or `within` has passed (`None`).
    fn wait(
        &mut self,
        within: Duration,
        mut done: impl FnMut(&Ledger, &Members) -> bool,
    ) -> Result<Option<i64>, String> {
        let deadline = Instant::now() + within;
        loop {
            self.members
                .pump(&mut self.ledger, Duration::from_millis(100))?;
            if done(&self.ledger, &self.members) {
                return Ok(Some(now_ms()));
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
        }
    }

    fn wait_ready(&mut self, procs: &[usize]) -> Result<(), String> {
        let timeout = self.cfg.settle_timeout;
        let ready = self.wait(timeout, |l, _| {
            procs.iter().all(|&p| l.proc(p).ready_at.is_some())
        })?;
        let labels: Vec<String> = procs
            .iter()
            .map(|&p| {
                let proc = self.ledger.proc(p);
                format!(
                    "{} after {}",
                    self.ledger.label(p),
                    since(proc.spawned_at, proc.ready_at)
                )
            })
            .collect();
        match ready {
            Some(_) => self.say(&format!("READY: {}", labels.join(", "))),
            None => self.say(&format!(
                "not every one of {} printed READY within {timeout:?}; going on",
                labels.join(", ")
            )),
        }
        Ok(())
    }

    /// Waits until every role is led and nothing moved for `--quiet-ms`, noting when every
    /// role was first led and when the shares were first within `tolerance`.
    fn settle(
        &mut self,
        what: &str,
        start: i64,
        tolerance: Option<f64>,
    ) -> Result<Settled, String> {
        self.settle_marking(what, start, tolerance, |_| false)
    }

    /// [`settle`](Self::settle), also noting in `marked` the first instant `mark` held.
    fn settle_marking(
        &mut self,
        what: &str,
        start: i64,
        tolerance: Option<f64>,
        mut mark: impl FnMut(&Ledger) -> bool,
    ) -> Result<Settled, String> {
        let deadline = Instant::now() + self.cfg.settle_timeout;
        let quiet = self.cfg.quiet_ms;
        let mut s = Settled::default();
        let mut last_say = Instant::now();
        loop {
            self.members
                .pump(&mut self.ledger, Duration::from_millis(100))?;
            let now = now_ms();
            if s.marked.is_none() && mark(&self.ledger) {
                s.marked = Some(now);
            }
            let unled = self.ledger.unled();
            if unled == 0 {
                s.all_led.get_or_insert(now);
                if tolerance.is_none_or(|t| analysis::shares(&self.ledger, t).1) {
                    s.balanced.get_or_insert(now);
                }
            }
            // The quiet period starts at the last change, or at the last READY of a live
            // member (the members move roles to it only once it is ready).
            let live = self.ledger.live();
            let readies: Vec<Option<i64>> =
                live.iter().map(|&p| self.ledger.proc(p).ready_at).collect();
            let ready = readies.iter().all(Option::is_some);
            let last_ready = readies.iter().flatten().copied().max().unwrap_or(start);
            let last = self
                .ledger
                .last_change()
                .unwrap_or(start)
                .max(start)
                .max(last_ready);
            if unled == 0 && ready && now - last >= quiet {
                s.settled = Some(last);
                self.say(&format!(
                    "{what}: settled {} after the change ({})",
                    since(start, Some(last)),
                    self.shares_text()
                ));
                return Ok(s);
            }
            if last_say.elapsed() >= Duration::from_secs(10) {
                last_say = Instant::now();
                self.say(&format!(
                    "{what}: {unled} role(s) unled; {}",
                    self.shares_text()
                ));
            }
            if Instant::now() >= deadline {
                self.say(&format!(
                    "{what}: not settled within {:?} ({unled} role(s) unled; {}); going on",
                    self.cfg.settle_timeout,
                    self.shares_text()
                ));
                return Ok(s);
            }
        }
    }

    /// `m1#1 1003 (v1), m2#1 998 (v1)`: what every live process leads.
    fn shares_text(&self) -> String {
        let live = self.ledger.live();
        if live.is_empty() {
            return "no live member".to_owned();
        }
        live.iter()
            .map(|&p| {
                let proc = self.ledger.proc(p);
                let stats = proc
                    .stats
                    .last()
                    .map_or(String::new(), |s| format!(", STATS {}", s.leading));
                format!(
                    "{} {} (v{}{stats})",
                    self.ledger.label(p),
                    self.ledger.leading(p),
                    proc.version
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// A row for the shares of the live processes against `tolerance` of an equal share.
    fn shares_row(&mut self, scenario: &str, tolerance: f64) {
        let live = self.ledger.live().len().max(1);
        let ideal = self.cfg.roles as f64 / live as f64;
        let (_, ok) = analysis::shares(&self.ledger, tolerance);
        let unled = self.ledger.unled();
        let figure = format!("{}; {unled} unled", self.shares_text());
        let target = format!(
            "each within {:.0} % of R/{live} = {ideal:.0} (±{:.0}), none unled",
            tolerance * 100.0,
            tolerance * ideal
        );
        self.report.target(
            scenario,
            &format!("shares of {live} members"),
            figure,
            &target,
            ok && unled == 0,
        );
        for &p in &self.ledger.live() {
            let metric = format!("share_{}", self.ledger.proc(p).member);
            self.report
                .metric(scenario, &metric, self.ledger.leading(p) as f64);
        }
    }

    /// Rows for the vacancies of moved roles (hand-overs, resigns) in `window`, against
    /// `target_ms` when given; returns the longest.
    fn move_rows(&mut self, scenario: &str, window: Window, target_ms: Option<i64>) -> i64 {
        let now = now_ms();
        let moves: Vec<_> = analysis::gaps(&self.ledger, window)
            .into_iter()
            .filter(analysis::Gap::is_move)
            .collect();
        let lengths: Vec<i64> = moves.iter().map(|g| g.length(now)).collect();
        let max = lengths.iter().copied().max().unwrap_or(0);
        let open = moves.iter().filter(|g| g.to.is_none()).count();
        let figure = format!(
            "max {}, p50 {}, p99 {} (n={}{})",
            ms(max),
            ms(quantile(&lengths, 0.5)),
            ms(quantile(&lengths, 0.99)),
            lengths.len(),
            if open > 0 {
                format!(", {open} still vacant")
            } else {
                String::new()
            }
        );
        match target_ms {
            Some(t) => self.report.target(
                scenario,
                "vacancy of a moved role (END handover|resigned -> next LEAD)",
                figure,
                &format!("max <= hand-over {} + 50 ms = {t} ms", self.cfg.handover_ms),
                max <= t && open == 0,
            ),
            None => self.report.info(
                scenario,
                "vacancy per hand-over (END handover|resigned -> next LEAD)",
                figure,
            ),
        }
        self.report
            .metric(scenario, "move_vacancy_max_ms", max as f64);
        self.report.metric(
            scenario,
            "move_vacancy_p99_ms",
            quantile(&lengths, 0.99) as f64,
        );
        let (stats_all, stats_one) = analysis::stats_in_motion(&self.ledger, window);
        let concurrent = analysis::max_concurrent(&moves, now);
        self.report.info(
            scenario,
            "roles in motion at once",
            format!(
                "{concurrent} vacant at once (END..LEAD); STATS in_motion: {stats_all} summed \
                 over members, {stats_one} in one member"
            ),
        );
        self.report
            .metric(scenario, "in_motion_vacant_max", concurrent as f64);
        self.report
            .metric(scenario, "in_motion_stats_max", stats_all as f64);
        max
    }

    /// a. The members start; every role led, shares balanced.
    pub fn settle_scenario(&mut self) -> Result<(), String> {
        let sc = "a settle";
        let start = now_ms();
        self.say(&format!(
            "{sc}: starting {} members for {} roles",
            self.cfg.members, self.cfg.roles
        ));
        let mut procs = Vec::new();
        for i in 1..=self.cfg.members {
            let policy = self.cfg.policy.clone();
            procs.push(self.spawn(&format!("m{i}"), 1, &policy)?);
        }
        self.wait_ready(&procs)?;
        let last_ready = procs
            .iter()
            .filter_map(|&p| self.ledger.proc(p).ready_at)
            .max();
        let s = self.settle(sc, start, Some(self.cfg.tolerance))?;
        let end = s.settled.unwrap_or_else(now_ms);
        self.report
            .info(sc, "all members READY", since(start, last_ready));
        self.report
            .info(sc, "every role led", since(start, s.all_led));
        self.report.target(
            sc,
            "time to balanced (every role led, shares within tolerance)",
            since(start, s.balanced),
            "reached",
            s.balanced.is_some(),
        );
        self.report.info(
            sc,
            "time to settled (last change before a quiet period)",
            since(start, s.settled),
        );
        self.shares_row(sc, self.cfg.tolerance);
        let window = Window::new(start, end);
        let handovers = analysis::ended(&self.ledger, window, EndReason::Handover);
        self.report
            .info(sc, "hand-overs done", handovers.to_string());
        if let Some(at) = s.settled {
            self.report
                .metric(sc, "settle_s", (at - start) as f64 / 1000.0);
        }
        self.report.metric(sc, "handovers", handovers as f64);
        Ok(())
    }

    /// b. The last member is SIGKILLed. Returns its member name.
    pub fn kill_scenario(&mut self) -> Result<String, String> {
        let sc = "b kill";
        let live = self.ledger.live();
        let Some(&victim) = live.last() else {
            return Err("kill: no live member".into());
        };
        let member = self.ledger.proc(victim).member.clone();
        let led = self.ledger.leading(victim);
        let killed_at = self.members.kill(&mut self.ledger, victim);
        self.say(&format!(
            "{sc}: SIGKILLed {} leading {led} role(s)",
            self.ledger.label(victim)
        ));
        // Its output to the end, so that its terms end at the kill.
        self.wait(Duration::from_secs(30), |l, _| l.proc(victim).closed)?;
        // Its leases as the state topic holds them: no renewal of its comes any more.
        let deadlines = self.cfg.leases.as_ref().map(|r| r.deadlines_of(&member));
        let s = self.settle(sc, killed_at, Some(self.cfg.kill_tolerance))?;
        let takeovers = analysis::takeovers(&self.ledger, victim, killed_at);
        let delays: Vec<i64> = takeovers.iter().filter_map(|t| t.1).collect();
        let never = takeovers.len() - delays.len();
        let covered = analysis::covered_at_kill(&self.ledger, victim, killed_at);
        let (p50, p99, max) = (
            quantile(&delays, 0.5),
            quantile(&delays, 0.99),
            delays.iter().copied().max().unwrap_or(0),
        );
        let lease = self.cfg.lease_ms;
        self.report.target(
            sc,
            "kill -> next LEAD per role it led",
            format!(
                "p50 {}, p99 {}, max {} (n={}; p99 {:+} ms past kill + lease)",
                ms(p50),
                ms(p99),
                ms(max),
                delays.len(),
                p99 - lease
            ),
            &format!("p99 <= kill + lease {lease} + 1000 = {} ms", lease + 1000),
            !delays.is_empty() && p99 <= lease + 1000,
        );
        match deadlines {
            Some(Ok(deadlines)) => {
                // Per role: its next LEAD against the deadline of the lease it had at the kill.
                let names = self.ledger.role_names();
                let after: Vec<i64> = takeovers
                    .iter()
                    .filter_map(|&(r, delay)| Some(killed_at + delay? - deadlines.get(&names[r])?))
                    .collect();
                let p99 = quantile(&after, 0.99);
                let earliest = after.iter().copied().min().unwrap_or(0);
                self.report.target(
                    sc,
                    "next LEAD after the role's lease deadline (read from the state topic)",
                    format!(
                        "p50 {}, p99 {}, max {}, earliest {} (n={} of {})",
                        ms(quantile(&after, 0.5)),
                        ms(p99),
                        ms(after.iter().copied().max().unwrap_or(0)),
                        ms(earliest),
                        after.len(),
                        takeovers.len()
                    ),
                    "p99 <= deadline + 1000 ms, every role timed",
                    !after.is_empty() && after.len() == takeovers.len() && p99 <= 1000,
                );
                self.report.metric(sc, "after_deadline_p99_ms", p99 as f64);
            }
            Some(Err(e)) => self.report.info(
                sc,
                "next LEAD after the role's lease deadline",
                format!("not measured: {e}"),
            ),
            None => {}
        }
        self.report.target(
            sc,
            "roles of the killed member taken over",
            format!(
                "{} of {led} ({never} never; {covered} already led by another at the kill)",
                delays.len()
            ),
            "all",
            never == 0,
        );
        self.report.info(
            sc,
            "time to settled after the kill",
            since(killed_at, s.settled),
        );
        self.shares_row(sc, self.cfg.kill_tolerance);
        self.report.metric(sc, "takeover_p50_ms", p50 as f64);
        self.report.metric(sc, "takeover_p99_ms", p99 as f64);
        self.report.metric(sc, "takeover_max_ms", max as f64);
        Ok(member)
    }

    /// c. The killed member starts again.
    pub fn restart_scenario(&mut self, member: &str) -> Result<(), String> {
        let sc = "c restart";
        let start = now_ms();
        let policy = self.cfg.policy.clone();
        let p = self.spawn(member, 1, &policy)?;
        let ideal = self.cfg.roles as f64 / self.ledger.live().len().max(1) as f64;
        let floor = ideal * (1.0 - self.cfg.tolerance);
        let s = self.settle_marking(sc, start, Some(self.cfg.tolerance), |l| {
            l.proc(p).ready_at.is_some() && l.leading(p) as f64 >= floor
        })?;
        let (back, ready) = (s.marked, self.ledger.proc(p).ready_at);
        let bound = 2 * self.cfg.lease_ms;
        let from_ready = match (ready, back) {
            (Some(r), Some(b)) => Some(b - r),
            _ => None,
        };
        self.report.target(
            sc,
            "READY -> share back (within tolerance below R/n)",
            match from_ready {
                Some(d) => format!(
                    "{} ({} after the start; READY {} after it)",
                    ms(d),
                    since(start, back),
                    since(start, ready)
                ),
                None => format!(
                    "never (leads {} of {floor:.0}; READY {})",
                    self.ledger.leading(p),
                    since(start, ready)
                ),
            },
            &format!("<= 2 x lease = {bound} ms"),
            from_ready.is_some_and(|d| d <= bound),
        );
        if let Some(d) = from_ready {
            self.report.metric(sc, "share_back_ms", d as f64);
        }
        let end = s.settled.unwrap_or_else(now_ms);
        let target = self.cfg.handover_ms + 50;
        self.move_rows(sc, Window::new(start, end), Some(target));
        self.shares_row(sc, self.cfg.tolerance);
        Ok(())
    }

    /// d. A member joins; then the first live member drains on SIGTERM.
    pub fn scale_scenario(&mut self) -> Result<(), String> {
        let sc = "d scale";
        let start = now_ms();
        let next = 1 + self
            .ledger
            .procs()
            .iter()
            .filter_map(|p| p.member.strip_prefix('m')?.parse::<usize>().ok())
            .max()
            .unwrap_or(0);
        let policy = self.cfg.policy.clone();
        let p = self.spawn(&format!("m{next}"), 1, &policy)?;
        self.wait_ready(&[p])?;
        let s = self.settle(sc, start, Some(self.cfg.tolerance))?;
        self.report
            .info(sc, "join: time to settled", since(start, s.settled));
        self.report
            .info(sc, "join: time to balanced", since(start, s.balanced));
        let end = s.settled.unwrap_or_else(now_ms);
        self.move_rows(sc, Window::new(start, end), None);
        self.shares_row(sc, self.cfg.tolerance);

        let sc = "d drain";
        let Some(&first) = self.ledger.live().first() else {
            return Err("drain: no live member".into());
        };
        let led = self.ledger.leading(first);
        let start = self.members.signal(first, "TERM", true)?;
        self.say(&format!(
            "{sc}: SIGTERM to {} leading {led} role(s)",
            self.ledger.label(first)
        ));
        let exited = self.wait(self.cfg.settle_timeout, |l, m| {
            m.reaped(first) && l.proc(first).closed
        })?;
        let proc = self.ledger.proc(first).clone();
        let drained_leading = proc.drained.map(|(_, n)| n);
        let exit = proc.exited.as_ref().map(|(_, how)| how.clone());
        self.report.target(
            sc,
            "drained member leads nothing, exits 0",
            format!(
                "DRAINED {} with {} role(s) led; {}",
                since(start, proc.drained.map(|(at, _)| at)),
                drained_leading.map_or("?".into(), |n| n.to_string()),
                exit.clone().unwrap_or_else(|| "still running".into())
            ),
            "DRAINED with 0, exit 0",
            drained_leading == Some(0) && exit.as_deref() == Some("exit 0") && exited.is_some(),
        );
        if let Some((at, _)) = proc.drained {
            self.report.metric(sc, "drain_ms", (at - start) as f64);
        }
        let s = self.settle(sc, start, Some(self.cfg.tolerance))?;
        self.report
            .info(sc, "drain: time to settled", since(start, s.settled));
        let end = s.settled.unwrap_or_else(now_ms);
        self.move_rows(sc, Window::new(start, end), None);
        self.shares_row(sc, self.cfg.tolerance);
        Ok(())
    }

    /// e. Every live member in turn: SIGTERM, exit, start again with the new version.
    pub fn upgrade_scenario(&mut self) -> Result<(), String> {
        let sc = "e upgrade";
        let start = now_ms();
        let version = self.cfg.upgrade_version;
        let policy = self.cfg.upgrade_policy.clone();
        let order = self.ledger.live();
        for (step, &old) in order.iter().enumerate() {
            let member = self.ledger.proc(old).member.clone();
            let step_start = self.members.signal(old, "TERM", true)?;
            self.say(&format!(
                "{sc} step {}: SIGTERM to {} leading {} role(s)",
                step + 1,
                self.ledger.label(old),
                self.ledger.leading(old)
            ));
            let exited = self.wait(self.cfg.settle_timeout, |l, m| {
                m.reaped(old) && l.proc(old).closed
            })?;
            let proc = self.ledger.proc(old).clone();
            if exited.is_none() || proc.drained.is_none_or(|(_, n)| n > 0) {
                self.report.target(
                    sc,
                    &format!("step {}: {member} drained and exited", step + 1),
                    format!(
                        "DRAINED {:?}, {}",
                        proc.drained,
                        proc.exited.map_or("still running".into(), |(_, h)| h)
                    ),
                    "DRAINED with 0, exit 0",
                    false,
                );
            }
            let new = self.spawn(&member, version, &policy)?;
            self.wait_ready(&[new])?;
            let s = self.settle(sc, step_start, None)?;
            let end = s.settled.unwrap_or_else(now_ms);
            let moves: Vec<i64> = analysis::gaps(&self.ledger, Window::new(step_start, end))
                .iter()
                .filter(|g| g.is_move())
                .map(|g| g.length(now_ms()))
                .collect();
            self.report.info(
                sc,
                &format!("step {}: {member} -> v{version}", step + 1),
                format!(
                    "drained {}, settled {}; v{version} leads {} of {}; longest vacancy {} \
                     over {} move(s)",
                    since(step_start, proc.drained.map(|(at, _)| at)),
                    since(step_start, s.settled),
                    self.ledger.led_by_version(version),
                    self.cfg.roles,
                    ms(moves.iter().copied().max().unwrap_or(0)),
                    moves.len()
                ),
            );
        }
        let end = now_ms();
        let v2 = self.ledger.led_by_version(version);
        self.report.target(
            sc,
            &format!("roles led by version-{version} members at the end"),
            format!("{v2} of {}", self.cfg.roles),
            "all",
            v2 == self.cfg.roles,
        );
        let window = Window::new(start, end);
        self.move_rows(sc, window, None);
        let moves: Vec<_> = analysis::gaps(&self.ledger, window)
            .into_iter()
            .filter(analysis::Gap::is_move)
            .collect();
        let worst = analysis::worst_role(&moves, end);
        let names = self.ledger.role_names();
        self.report.info(
            sc,
            "vacancy per role (sum of its moves' vacancies)",
            match worst {
                Some((r, total)) => format!(
                    "max {} ({}, {} move(s))",
                    ms(total),
                    names[r],
                    moves.iter().filter(|g| g.role == r).count()
                ),
                None => "no move".into(),
            },
        );
        if let Some((_, total)) = worst {
            self.report.metric(sc, "role_vacancy_max_ms", total as f64);
        }
        self.report.info(
            sc,
            "hand-overs done",
            analysis::ended(&self.ledger, window, EndReason::Handover).to_string(),
        );
        Ok(())
    }

    /// After the scenarios (or an early stop): drains every member, then the whole run's
    /// safety and protocol rows, CPU and requests.
    pub fn finish(&mut self, grace: Duration) {
        self.say("stopping every member (SIGTERM, then SIGKILL after the grace)");
        let killed = self.members.stop_all(&mut self.ledger, grace);
        if !killed.is_empty() {
            self.say(&format!(
                "had to SIGKILL {} after {grace:?}",
                killed.join(", ")
            ));
        }
        let overlaps = analysis::overlaps(&self.ledger);
        let count = |k| overlaps.iter().filter(|o| o.kind == k).count();
        let violations = count(analysis::OverlapKind::Violation);
        self.report.safety(
            "all",
            "overlapping terms with nothing to show the older one fenced (as reported)",
            format!(
                "{violations} violation(s); {} later reported fenced, {} superseded (a newer \
                 term minted after it, its end reported at a hand-over), {} overlapping \
                 report(s) of killed/exited processes",
                count(analysis::OverlapKind::Fenced),
                count(analysis::OverlapKind::Superseded),
                count(analysis::OverlapKind::Unreported)
            ),
            "0 violations",
            violations == 0,
        );
        // A role elected twice: a member took a role while another, deposed by the newer
        // election, still reported leading it. The guarantee is one election per failover
        // when no answer is late, and a deposed leader that stops within a renew interval.
        let deposed: Vec<i64> = overlaps
            .iter()
            .filter(|o| {
                matches!(
                    o.kind,
                    analysis::OverlapKind::Fenced | analysis::OverlapKind::Superseded
                )
            })
            .filter_map(|o| o.overlap_ms)
            .collect();
        let mut older_terms: Vec<(usize, i64)> = overlaps
            .iter()
            .filter(|o| o.kind != analysis::OverlapKind::Unreported)
            .map(|o| (o.role, o.older.1))
            .collect();
        older_terms.sort_unstable();
        older_terms.dedup();
        let elections: usize = (0..self.ledger.role_names().len())
            .map(|r| self.ledger.terms(r).len())
            .sum();
        self.report.info(
            "all",
            "terms deposed while their holder still reported leading (a second election)",
            format!(
                "{} of {elections} terms; the holder's END after the newer LEAD: p50 {}, max {} \
                 (n={})",
                older_terms.len(),
                ms(quantile(&deposed, 0.5)),
                ms(deposed.iter().copied().max().unwrap_or(0)),
                deposed.len()
            ),
        );
        let worst = deposed.iter().copied().max().unwrap_or(0);
        self.report.target(
            "all",
            "a deposed leader reports its end within a renew interval",
            format!("longest {}", ms(worst)),
            &format!("<= renew interval {}", ms(self.cfg.renew_ms)),
            worst <= self.cfg.renew_ms,
        );
        let names = self.ledger.role_names();
        for o in overlaps
            .iter()
            .filter(|o| o.kind == analysis::OverlapKind::Violation)
            .take(20)
        {
            println!(
                "  violation: {}: {} term {} ({}) still led when {} reported LEAD term {}; \
                 overlap {}",
                names[o.role],
                self.ledger.label(o.older.0),
                o.older.1,
                o.older
                    .2
                    .map_or("never ended".into(), |e| format!("ended {e}")),
                self.ledger.label(o.newer.0),
                o.newer.1,
                o.overlap_ms.map_or("to the end of the run".into(), ms)
            );
        }
        let back = analysis::terms_not_growing(&self.ledger);
        self.report.target(
            "all",
            "term numbers grow from one leader to the next",
            format!("{} pair(s) did not", back.len()),
            "all grow",
            back.is_empty(),
        );
        for (r, older, newer) in back.iter().take(10) {
            println!("  term order: {}: term {older} then {newer}", names[*r]);
        }
        let anomalies = self.ledger.anomalies().len() + self.ledger.malformed().len();
        self.report.target(
            "all",
            "protocol: well-formed, consistent event lines",
            format!(
                "{} malformed line(s), {} anomaly(ies); {} process(es) SIGKILLed at the end",
                self.ledger.malformed().len(),
                self.ledger.anomalies().len(),
                killed.len()
            ),
            "none",
            anomalies == 0 && killed.is_empty(),
        );
        for a in self
            .ledger
            .malformed()
            .iter()
            .chain(self.ledger.anomalies())
            .take(20)
        {
            println!("  protocol: {a}");
        }
        let end = now_ms();
        let secs = ((end - self.started) as f64 / 1000.0).max(0.001);
        let cpu = self.members.cpu_seconds();
        self.report.info(
            "all",
            "member CPU",
            format!("{cpu:.1} s over {secs:.0} s ({:.2} cores)", cpu / secs),
        );
        self.report.metric("all", "member_cpu_s", cpu);
        let rate = analysis::requests_per_role(
            &self.ledger,
            Window::new(self.started, end),
            self.cfg.roles,
        );
        self.report.info(
            "all",
            "requests per second per role (STATS requests=)",
            match rate {
                Some(r) => format!("{r:.3}"),
                None => "not reported (no STATS line has requests=<n>)".into(),
            },
        );
        if let Some(r) = rate {
            self.report.metric("all", "requests_per_s_per_role", r);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenario_lists() {
        assert_eq!(Scenarios::parse("all").unwrap(), Scenarios::ALL);
        assert_eq!(
            Scenarios::parse("settle,kill,restart,scale,upgrade").unwrap(),
            Scenarios::ALL
        );
        assert_eq!(Scenarios::parse("a,b,c,d,e").unwrap(), Scenarios::ALL);
        let s = Scenarios::parse("settle").unwrap();
        assert!(!s.kill && !s.restart && !s.scale && !s.upgrade);
        assert!(Scenarios::parse("scale,upgrade").unwrap().upgrade);
        assert!(Scenarios::parse("restart")
            .unwrap_err()
            .contains("add kill"));
        assert!(Scenarios::parse("kill,boom")
            .unwrap_err()
            .contains("unknown scenario `boom`"));
    }
}
