//! What the member processes reported, kept per role: every term (who, its number, when it
//! started, when and how it ended), and per process its fate and its STATS. The bench feeds
//! it each parsed line (in the order the lines arrive) and what it did to the processes (kills,
//! exits); the figures come from [`analysis`](super::analysis), on the members' own stamps.
//!
//! A process is one start of a member: a member restarted under the same name is a new
//! process, so that a killed process's terms never mix with its successor's.

use std::collections::HashMap;

use crate::events::{EndReason, Event, Stats};

/// How a term ended, as far as the bench knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TermEnd {
    /// The member printed `END` with this reason.
    Reported(EndReason),
    /// The process was SIGKILLed by the bench before it printed `END`; the term ends at the
    /// kill.
    Killed,
    /// The process exited (or its stdout closed) before it printed `END`.
    Exited,
}

impl std::fmt::Display for TermEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TermEnd::Reported(r) => write!(f, "{r}"),
            TermEnd::Killed => f.write_str("killed"),
            TermEnd::Exited => f.write_str("exited"),
        }
    }
}

/// One term of one role, as reported by one process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Term {
    /// The process that led.
    pub proc: usize,
    /// The term number it reported.
    pub term: i64,
    /// When it reported `LEAD`.
    pub lead_at: i64,
    /// When and how the term ended, if it did.
    pub end: Option<(i64, TermEnd)>,
}

/// One start of a member process.
#[derive(Clone, Debug, Default)]
pub struct Proc {
    /// The member's name (the same for every start of the member).
    pub member: String,
    /// The `--version` it was started with.
    pub version: u32,
    /// When the bench started it.
    pub spawned_at: i64,
    /// When it printed `READY`.
    pub ready_at: Option<i64>,
    /// When it printed `DRAINED`, and how many roles it still led then.
    pub drained: Option<(i64, usize)>,
    /// When the bench SIGKILLed it.
    pub killed_at: Option<i64>,
    /// When it was seen to have exited, and how (`exit 0`, `signal 9`, ...).
    pub exited: Option<(i64, String)>,
    /// Whether its stdout reached its end.
    pub closed: bool,
    /// Its STATS, in order.
    pub stats: Vec<Stats>,
    /// Lines that were not events, and malformed events.
    pub ignored_lines: usize,
}

impl Proc {
    /// Whether the process runs (neither killed nor seen to exit nor closed).
    pub fn alive(&self) -> bool {
        self.killed_at.is_none() && self.exited.is_none() && !self.closed
    }

    /// `member#k`: the member and which of its starts this is, for reports.
    pub fn label(&self, start: usize) -> String {
        format!("{}#{start}", self.member)
    }
}

/// Every role's terms and every process's fate, from the event streams.
#[derive(Debug)]
pub struct Ledger {
    names: Vec<String>,
    index: HashMap<String, usize>,
    /// The roles the members were asked to lead (the first `expected` names).
    expected: usize,
    /// Per role, its terms in the order their `LEAD` arrived.
    terms: Vec<Vec<Term>>,
    /// Per role, the indexes of its terms that have not ended.
    open: Vec<Vec<usize>>,
    procs: Vec<Proc>,
    /// Per process, how many terms it has open.
    leading: Vec<usize>,
    /// Per process, which start of its member it is (1 for the first).
    starts: Vec<usize>,
    /// Protocol anomalies (an `END` without a term, a second `LEAD` of a role, ...).
    anomalies: Vec<String>,
    /// Malformed event lines, with the process's label.
    malformed: Vec<String>,
    /// When the last `LEAD` or `END` arrived, on the bench's clock.
    last_change: Option<i64>,
}

impl Ledger {
    /// A ledger for the roles `roles` (the roles every member was asked to lead).
    pub fn new(roles: Vec<String>) -> Ledger {
        let expected = roles.len();
        let index = roles
            .iter()
            .enumerate()
            .map(|(i, r)| (r.clone(), i))
            .collect();
        Ledger {
            terms: vec![Vec::new(); expected],
            open: vec![Vec::new(); expected],
            names: roles,
            index,
            expected,
            procs: Vec::new(),
            leading: Vec::new(),
            starts: Vec::new(),
            anomalies: Vec::new(),
            malformed: Vec::new(),
            last_change: None,
        }
    }

    /// Notes a new process of `member`, started at `at`; returns its id.
    pub fn spawned(&mut self, member: &str, version: u32, at: i64) -> usize {
        let start = 1 + self.procs.iter().filter(|p| p.member == member).count();
        self.procs.push(Proc {
            member: member.to_owned(),
            version,
            spawned_at: at,
            ..Proc::default()
        });
        self.leading.push(0);
        self.starts.push(start);
        self.procs.len() - 1
    }

    /// The process `p`.
    pub fn proc(&self, p: usize) -> &Proc {
        &self.procs[p]
    }

    /// Every process, by id.
    pub fn procs(&self) -> &[Proc] {
        &self.procs
    }

    /// `member#k` of process `p`.
    pub fn label(&self, p: usize) -> String {
        self.procs[p].label(self.starts[p])
    }

    /// How many roles the members were asked to lead.
    pub fn expected(&self) -> usize {
        self.expected
    }

    /// Every role seen (the expected ones first), by index.
    pub fn role_names(&self) -> &[String] {
        &self.names
    }

    /// The terms of role `r`, in the order their `LEAD` arrived.
    pub fn terms(&self, r: usize) -> &[Term] {
        &self.terms[r]
    }

    /// Protocol anomalies seen so far.
    pub fn anomalies(&self) -> &[String] {
        &self.anomalies
    }

    /// Malformed event lines seen so far.
    pub fn malformed(&self) -> &[String] {
        &self.malformed
    }

    /// When the last `LEAD` or `END` arrived, on the bench's clock.
    pub fn last_change(&self) -> Option<i64> {
        self.last_change
    }

    fn role(&mut self, name: &str) -> usize {
        if let Some(&r) = self.index.get(name) {
            return r;
        }
        self.anomalies
            .push(format!("a role the members were not asked to lead: {name}"));
        self.names.push(name.to_owned());
        self.terms.push(Vec::new());
        self.open.push(Vec::new());
        let r = self.names.len() - 1;
        self.index.insert(name.to_owned(), r);
        r
    }

    /// One line of process `p`'s stdout, which arrived at `received` on the bench's clock.
    pub fn line(&mut self, p: usize, line: &str, received: i64) {
        match crate::events::parse_line(line) {
            Ok(Some(event)) => self.event(p, event, received),
            Ok(None) => self.procs[p].ignored_lines += 1,
            Err(e) => {
                self.procs[p].ignored_lines += 1;
                let label = self.label(p);
                self.malformed.push(format!("{label}: {e}"));
            }
        }
    }

    /// One event of process `p`, which arrived at `received` on the bench's clock.
    pub fn event(&mut self, p: usize, event: Event, received: i64) {
        let label = self.label(p);
        match event {
            Event::Ready { member, at } => {
                if member != self.procs[p].member {
                    self.anomalies
                        .push(format!("{label}: READY names another member, {member}"));
                }
                self.procs[p].ready_at.get_or_insert(at);
            }
            Event::Drained { member, at } => {
                if member != self.procs[p].member {
                    self.anomalies
                        .push(format!("{label}: DRAINED names another member, {member}"));
                }
                let leading = self.leading[p];
                if leading > 0 {
                    self.anomalies.push(format!(
                        "{label}: DRAINED while it still led {leading} role(s)"
                    ));
                }
                self.procs[p].drained = Some((at, leading));
            }
            Event::Stats(stats) => self.procs[p].stats.push(stats),
            Event::Lead { role, at, term } => {
                self.last_change = Some(received);
                let r = self.role(&role);
                if let Some(&t) = self.open[r].iter().find(|&&t| self.terms[r][t].proc == p) {
                    self.anomalies.push(format!(
                        "{label}: LEAD {role} term {term} while its term {} of it had not ended \
                         (that term is taken as ended there)",
                        self.terms[r][t].term
                    ));
                    self.close(r, t, at, TermEnd::Exited);
                }
                self.terms[r].push(Term {
                    proc: p,
                    term,
                    lead_at: at,
                    end: None,
                });
                self.open[r].push(self.terms[r].len() - 1);
                self.leading[p] += 1;
            }
            Event::End { role, at, reason } => {
                self.last_change = Some(received);
                let r = self.role(&role);
                match self.open[r].iter().find(|&&t| self.terms[r][t].proc == p) {
                    Some(&t) => self.close(r, t, at, TermEnd::Reported(reason)),
                    None => self.anomalies.push(format!(
                        "{label}: END {role} ({reason}) without a term of it"
                    )),
                }
            }
        }
    }

    fn close(&mut self, r: usize, t: usize, at: i64, how: TermEnd) {
        let term = &mut self.terms[r][t];
        term.end = Some((at, how));
        self.leading[term.proc] -= 1;
        self.open[r].retain(|&o| o != t);
    }

    /// The bench SIGKILLed process `p` at `at`. Its open terms end at `at` once its stdout
    /// has been read to the end ([`closed`](Self::closed)).
    pub fn killed(&mut self, p: usize, at: i64) {
        self.procs[p].killed_at.get_or_insert(at);
    }

    /// Process `p` was seen to have exited at `at`, `how` (`exit 0`, `signal 9`).
    pub fn exited(&mut self, p: usize, at: i64, how: String) {
        if self.procs[p].exited.is_none() {
            self.procs[p].exited = Some((at, how));
        }
    }

    /// Process `p`'s stdout reached its end at `at` (every line it printed has been read):
    /// its open terms end, at the kill if the bench killed it, else here.
    pub fn closed(&mut self, p: usize, at: i64) {
        self.procs[p].closed = true;
        let (end, how) = match self.procs[p].killed_at {
            Some(k) => (k, TermEnd::Killed),
            None => (at, TermEnd::Exited),
        };
        let mut left = 0;
        for r in 0..self.terms.len() {
            if let Some(&t) = self.open[r].iter().find(|&&t| self.terms[r][t].proc == p) {
                // A term cannot end before it began (a kill stamped before a LEAD printed
                // just before it, on a clock read a little earlier).
                let end = end.max(self.terms[r][t].lead_at);
                self.close(r, t, end, how);
                left += 1;
            }
        }
        if left > 0 && how == TermEnd::Exited {
            let label = self.label(p);
            self.anomalies.push(format!(
                "{label}: ended its output while it led {left} role(s), without END"
            ));
        }
    }

    /// How many roles process `p` leads now (its terms that have not ended).
    pub fn leading(&self, p: usize) -> usize {
        self.leading[p]
    }

    /// The leader of role `r` now: the process of its latest open term among live processes.
    pub fn leader(&self, r: usize) -> Option<usize> {
        self.open[r]
            .iter()
            .rev()
            .map(|&t| self.terms[r][t].proc)
            .find(|&p| self.procs[p].alive())
    }

    /// How many expected roles no live process leads now.
    pub fn unled(&self) -> usize {
        (0..self.expected)
            .filter(|&r| self.leader(r).is_none())
            .count()
    }

    /// How many expected roles processes of version `version` lead now.
    pub fn led_by_version(&self, version: u32) -> usize {
        (0..self.expected)
            .filter(|&r| {
                self.leader(r)
                    .is_some_and(|p| self.procs[p].version == version)
            })
            .count()
    }

    /// The live processes, by id.
    pub fn live(&self) -> Vec<usize> {
        (0..self.procs.len())
            .filter(|&p| self.procs[p].alive())
            .collect()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A ledger of `n` roles `r-0` .. `r-(n-1)`.
    pub(crate) fn ledger(n: usize) -> Ledger {
        Ledger::new((0..n).map(|i| format!("r-{i}")).collect())
    }

    /// Feeds `lines` of process `p` (arrival time = the line's own stamp, or 0).
    pub(crate) fn feed(l: &mut Ledger, p: usize, lines: &[&str]) {
        for line in lines {
            let at = crate::events::parse_line(line)
                .ok()
                .flatten()
                .map_or(0, |e| e.at());
            l.line(p, line, at);
        }
    }

    #[test]
    fn terms_open_and_end_per_process() {
        let mut l = ledger(3);
        let a = l.spawned("a", 1, 0);
        let b = l.spawned("b", 1, 0);
        feed(
            &mut l,
            a,
            &[
                "READY a 5",
                "LEAD r-0 10 1",
                "LEAD r-1 11 1",
                "LEAD r-2 12 1",
            ],
        );
        feed(&mut l, b, &["READY b 6"]);
        assert_eq!((l.leading(a), l.leading(b), l.unled()), (3, 0, 0));
        feed(&mut l, a, &["END r-2 20 handover"]);
        assert_eq!(l.unled(), 1);
        feed(
            &mut l,
            b,
            &[
                "LEAD r-2 25 2",
                "STATS 30 leading=1 preferred=1 in_motion=0",
            ],
        );
        assert_eq!((l.leading(a), l.leading(b), l.unled()), (2, 1, 0));
        assert_eq!(l.leader(2), Some(b));
        assert_eq!(
            l.terms(2)[0].end,
            Some((20, TermEnd::Reported(EndReason::Handover)))
        );
        assert_eq!(l.proc(a).ready_at, Some(5));
        assert_eq!(l.proc(b).stats.len(), 1);
        assert_eq!(l.last_change(), Some(25));
        assert!(l.anomalies().is_empty() && l.malformed().is_empty());
    }

    #[test]
    fn a_killed_process_ends_its_terms_at_the_kill_once_its_output_is_read() {
        let mut l = ledger(2);
        let a = l.spawned("a", 1, 0);
        feed(&mut l, a, &["LEAD r-0 10 1"]);
        l.killed(a, 100);
        // A line printed before the kill that arrives after it.
        feed(&mut l, a, &["LEAD r-1 99 1"]);
        // Dead processes lead nothing, even before their output is read to its end.
        assert_eq!(l.unled(), 2);
        assert_eq!(l.leading(a), 2);
        l.closed(a, 150);
        assert_eq!(l.leading(a), 0);
        assert_eq!(l.terms(0)[0].end, Some((100, TermEnd::Killed)));
        assert_eq!(l.terms(1)[0].end, Some((100, TermEnd::Killed)));
        assert!(l.anomalies().is_empty());
    }

    #[test]
    fn a_restarted_member_is_a_new_process() {
        let mut l = ledger(1);
        let a1 = l.spawned("a", 1, 0);
        l.killed(a1, 5);
        l.closed(a1, 6);
        let a2 = l.spawned("a", 2, 7);
        assert_eq!(
            (l.label(a1), l.label(a2)),
            ("a#1".to_owned(), "a#2".to_owned())
        );
        feed(&mut l, a2, &["LEAD r-0 10 3"]);
        assert_eq!(l.led_by_version(2), 1);
        assert_eq!(l.led_by_version(1), 0);
        assert_eq!(l.live(), vec![a2]);
    }

    #[test]
    fn protocol_anomalies_are_noted() {
        let mut l = ledger(1);
        let a = l.spawned("a", 1, 0);
        feed(
            &mut l,
            a,
            &[
                "hello",
                "LEAD r-0 1 1",
                "LEAD r-0 2 2",
                "END r-9 3 other",
                "END r-0 4 lost",
                "READY b 5",
                "DRAINED a 6",
            ],
        );
        let all = l.anomalies().join("\n");
        assert!(
            all.contains("a#1: LEAD r-0 term 2 while its term 1"),
            "{all}"
        );
        assert!(all.contains("not asked to lead: r-9"), "{all}");
        assert!(all.contains("END r-9 (other) without a term"), "{all}");
        assert!(all.contains("READY names another member, b"), "{all}");
        assert!(
            all.contains("DRAINED while it still led 1 role(s)"),
            "{all}"
        );
        assert_eq!(l.malformed().len(), 1);
        assert!(l.malformed()[0].starts_with("a#1: `END r-0 4 lost`"));
        assert_eq!(l.proc(a).ignored_lines, 2);
        assert_eq!(l.proc(a).drained, Some((6, 1)));
        l.exited(a, 7, "exit 0".into());
        l.closed(a, 8);
        let all = l.anomalies().join("\n");
        assert!(
            all.contains("ended its output while it led 1 role(s)"),
            "{all}"
        );
        assert_eq!(l.terms(0)[1].end, Some((8, TermEnd::Exited)));
    }
}
