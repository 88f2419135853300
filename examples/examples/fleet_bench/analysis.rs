//! The figures, computed from a [`Ledger`] on the members' own stamps (one machine, one
//! clock): overlapping terms, vacancies (a role led by no one), take-overs after a kill,
//! roles in motion, shares, request rates.

use crate::events::EndReason;
use crate::ledger::{Ledger, TermEnd};

/// A time window `[from, to]`, in unix ms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    pub from: i64,
    pub to: i64,
}

impl Window {
    pub fn new(from: i64, to: i64) -> Window {
        Window { from, to }
    }

    pub fn contains(&self, at: i64) -> bool {
        self.from <= at && at <= self.to
    }
}

/// What a `LEAD` that came while another process's term of the role had not ended is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OverlapKind {
    /// The older term was later reported fenced: the newer term deposed it.
    Fenced,
    /// The older term's process was killed (or exited) without reporting an end: an
    /// overlapping report, not a violation.
    Unreported,
    /// The older term was reported ended otherwise (a hand-over, a resign) after the newer
    /// `LEAD`, and the newer term's number is higher. A term number is the offset of the
    /// term's first lease record, and a pair's writes are refused once a newer pair of the
    /// role is minted, so the newer pair was minted after the older one wrote its first
    /// record: the coordinator fenced the older term before the newer `LEAD`. Its holder
    /// learned of it only at its own hand-over (or its `END` line was printed late).
    Superseded,
    /// The older term never ended while both processes ran, or it was reported ended
    /// otherwise after the newer `LEAD` though the newer term's number is not higher: two
    /// leaders by their own reports, with nothing that shows the older one fenced.
    Violation,
}

/// Two terms of one role, of two processes, that overlap as reported.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Overlap {
    pub role: usize,
    /// The older term's process, term number and how it ended (`None`: it has not).
    pub older: (usize, i64, Option<TermEnd>),
    /// The newer term's process and term number.
    pub newer: (usize, i64),
    /// From the newer `LEAD` to the older term's end (`None`: it has not ended).
    pub overlap_ms: Option<i64>,
    pub kind: OverlapKind,
}

/// Every pair of terms of one role, of two processes, where the newer `LEAD` came before
/// the older term ended.
pub fn overlaps(ledger: &Ledger) -> Vec<Overlap> {
    let mut found = Vec::new();
    for r in 0..ledger.role_names().len() {
        let mut terms: Vec<_> = ledger.terms(r).iter().collect();
        terms.sort_by_key(|t| t.lead_at);
        for (j, newer) in terms.iter().enumerate() {
            for older in &terms[..j] {
                if older.proc == newer.proc {
                    continue;
                }
                let ends_after = older.end.is_none_or(|(at, _)| at > newer.lead_at);
                if !ends_after {
                    continue;
                }
                let kind = match older.end {
                    Some((_, TermEnd::Reported(EndReason::Fenced))) => OverlapKind::Fenced,
                    Some((_, TermEnd::Killed | TermEnd::Exited)) => OverlapKind::Unreported,
                    Some((_, TermEnd::Reported(_))) if newer.term > older.term => {
                        OverlapKind::Superseded
                    }
                    Some((_, TermEnd::Reported(_))) | None => OverlapKind::Violation,
                };
                found.push(Overlap {
                    role: r,
                    older: (older.proc, older.term, older.end.map(|(_, h)| h)),
                    newer: (newer.proc, newer.term),
                    overlap_ms: older.end.map(|(at, _)| at - newer.lead_at),
                    kind,
                });
            }
        }
    }
    found
}

/// Consecutive terms of a role (by `LEAD` time, of two processes) whose term number did not
/// grow: (role, older term, newer term).
pub fn terms_not_growing(ledger: &Ledger) -> Vec<(usize, i64, i64)> {
    let mut found = Vec::new();
    for r in 0..ledger.role_names().len() {
        let mut terms: Vec<_> = ledger.terms(r).iter().collect();
        terms.sort_by_key(|t| t.lead_at);
        for pair in terms.windows(2) {
            if pair[0].proc != pair[1].proc && pair[1].term <= pair[0].term {
                found.push((r, pair[0].term, pair[1].term));
            }
        }
    }
    found
}

/// A time in which a role was led by no one: from the end of the terms that covered it (the
/// one that ended last) to the next `LEAD`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gap {
    pub role: usize,
    pub from: i64,
    /// The next `LEAD` (`None`: none yet).
    pub to: Option<i64>,
    /// How the term that opened the gap ended, and its process.
    pub cause: TermEnd,
    pub proc: usize,
}

impl Gap {
    /// Its length; up to `now` if it has not closed.
    pub fn length(&self, now: i64) -> i64 {
        self.to.unwrap_or(now) - self.from
    }

    /// Whether a move caused it (a hand-over or a resign: a drain, a balance move).
    pub fn is_move(&self) -> bool {
        matches!(
            self.cause,
            TermEnd::Reported(EndReason::Handover | EndReason::Resigned)
        )
    }
}

/// Every gap of every role that began in `window`. The time before a role's first `LEAD`
/// is not a gap.
pub fn gaps(ledger: &Ledger, window: Window) -> Vec<Gap> {
    let mut found = Vec::new();
    for r in 0..ledger.role_names().len() {
        let mut terms: Vec<_> = ledger.terms(r).iter().collect();
        terms.sort_by_key(|t| t.lead_at);
        // The end of the terms seen so far (None: one of them has not ended), with the
        // cause and process of the one that ends last.
        let mut covered: Option<(Option<i64>, TermEnd, usize)> = None;
        for t in terms {
            if let Some((Some(end), cause, proc)) = covered {
                if t.lead_at > end && window.contains(end) {
                    found.push(Gap {
                        role: r,
                        from: end,
                        to: Some(t.lead_at),
                        cause,
                        proc,
                    });
                }
            }
            let this_end = t.end.map(|(at, _)| at);
            let this_cause = t.end.map_or(TermEnd::Exited, |(_, h)| h);
            covered = match covered {
                None => Some((this_end, this_cause, t.proc)),
                Some((Some(end), _, _)) if t.lead_at > end => Some((this_end, this_cause, t.proc)),
                Some((None, c, p)) => Some((None, c, p)),
                Some((Some(end), c, p)) => match this_end {
                    None => Some((None, this_cause, t.proc)),
                    Some(e) if e > end => Some((Some(e), this_cause, t.proc)),
                    Some(_) => Some((Some(end), c, p)),
                },
            };
        }
        if let Some((Some(end), cause, proc)) = covered {
            if window.contains(end) {
                found.push(Gap {
                    role: r,
                    from: end,
                    to: None,
                    cause,
                    proc,
                });
            }
        }
    }
    found
}

/// The most gaps open at one instant (a gap still open counts until `now`).
pub fn max_concurrent(gaps: &[Gap], now: i64) -> usize {
    let mut edges: Vec<(i64, i32)> = Vec::with_capacity(gaps.len() * 2);
    for g in gaps {
        edges.push((g.from, 1));
        edges.push((g.to.unwrap_or(now), -1));
    }
    // At one instant, closes before opens: a gap that ends when another begins does not
    // overlap it.
    edges.sort();
    let (mut open, mut most) = (0i64, 0i64);
    for (_, d) in edges {
        open += i64::from(d);
        most = most.max(open);
    }
    most as usize
}

/// The largest total time one role spent in gaps among `gaps`: (role, total ms).
pub fn worst_role(gaps: &[Gap], now: i64) -> Option<(usize, i64)> {
    let mut per_role: std::collections::BTreeMap<usize, i64> = Default::default();
    for g in gaps {
        *per_role.entry(g.role).or_default() += g.length(now);
    }
    per_role
        .into_iter()
        .max_by_key(|&(r, total)| (total, std::cmp::Reverse(r)))
}

/// For each role process `p` led when it was killed at `killed_at`: how long after the kill
/// another process reported `LEAD` (`None`: none has yet).
pub fn takeovers(ledger: &Ledger, p: usize, killed_at: i64) -> Vec<(usize, Option<i64>)> {
    let window = Window::new(killed_at, killed_at);
    gaps(ledger, window)
        .into_iter()
        .filter(|g| g.proc == p && g.cause == TermEnd::Killed)
        .map(|g| (g.role, g.to.map(|to| to - killed_at)))
        .collect()
}

/// Roles that the killed process `p` led at the kill and that another process already led
/// then (no gap): how many.
pub fn covered_at_kill(ledger: &Ledger, p: usize, killed_at: i64) -> usize {
    (0..ledger.role_names().len())
        .filter(|&r| {
            let terms = ledger.terms(r);
            let killed = terms
                .iter()
                .any(|t| t.proc == p && t.end == Some((killed_at, TermEnd::Killed)));
            killed
                && terms.iter().any(|t| {
                    t.proc != p
                        && t.lead_at <= killed_at
                        && t.end.is_none_or(|(at, _)| at > killed_at)
                })
        })
        .count()
}

/// From the STATS in `window`: the most roles in motion at once over all processes (each
/// process counted at its latest STATS, if that is at most [`STATS_FRESH_MS`] old: one that
/// stopped counts for nothing), and the most one process reported.
pub fn stats_in_motion(ledger: &Ledger, window: Window) -> (u64, u64) {
    let mut samples: Vec<(i64, usize, u64)> = Vec::new();
    for (p, proc) in ledger.procs().iter().enumerate() {
        for s in &proc.stats {
            if window.contains(s.at) {
                samples.push((s.at, p, s.in_motion));
            }
        }
    }
    samples.sort();
    let mut latest: Vec<Option<(i64, u64)>> = vec![None; ledger.procs().len()];
    let (mut all, mut one) = (0u64, 0u64);
    for &(at, p, n) in &samples {
        latest[p] = Some((at, n));
        let sum = latest
            .iter()
            .flatten()
            .filter(|(seen, _)| at - seen <= STATS_FRESH_MS)
            .map(|(_, n)| n)
            .sum();
        all = all.max(sum);
        one = one.max(n);
    }
    (all, one)
}

/// How old a process's latest STATS may be and still count (they come every second).
pub const STATS_FRESH_MS: i64 = 1500;

/// Terms that ended in `window` with the reason `reason`.
pub fn ended(ledger: &Ledger, window: Window, reason: EndReason) -> usize {
    (0..ledger.role_names().len())
        .flat_map(|r| ledger.terms(r))
        .filter(|t| {
            t.end
                .is_some_and(|(at, h)| h == TermEnd::Reported(reason) && window.contains(at))
        })
        .count()
}

/// Requests per second per role over `window`, from the `requests=` field of STATS: the
/// sum over processes of (last - first) / seconds between them, divided by `roles`. `None`
/// when no process reported it twice in the window.
pub fn requests_per_role(ledger: &Ledger, window: Window, roles: usize) -> Option<f64> {
    let mut rate = 0.0;
    let mut any = false;
    for proc in ledger.procs() {
        let mut with: Vec<(i64, u64)> = proc
            .stats
            .iter()
            .filter(|s| window.contains(s.at))
            .filter_map(|s| s.requests.map(|n| (s.at, n)))
            .collect();
        with.sort();
        if let (Some(first), Some(last)) = (with.first(), with.last()) {
            if last.0 > first.0 {
                any = true;
                rate += last.1.saturating_sub(first.1) as f64 * 1000.0 / (last.0 - first.0) as f64;
            }
        }
    }
    (any && roles > 0).then(|| rate / roles as f64)
}

/// Whether `count` is within `tolerance` (a fraction: 0.02 for 2 %) of `ideal`.
pub fn within(count: usize, ideal: f64, tolerance: f64) -> bool {
    (count as f64 - ideal).abs() <= tolerance * ideal
}

/// The leading counts of the live processes (by id) and whether each is within `tolerance`
/// of an equal share of the expected roles.
pub fn shares(ledger: &Ledger, tolerance: f64) -> (Vec<(usize, usize)>, bool) {
    let live = ledger.live();
    if live.is_empty() {
        return (Vec::new(), false);
    }
    let ideal = ledger.expected() as f64 / live.len() as f64;
    let counts: Vec<(usize, usize)> = live.iter().map(|&p| (p, ledger.leading(p))).collect();
    let ok = counts.iter().all(|&(_, n)| within(n, ideal, tolerance));
    (counts, ok)
}

/// The value at quantile `q` (nearest rank) of `values` (sorted here); 0 when empty.
pub fn quantile(values: &[i64], q: f64) -> i64 {
    let mut v = values.to_vec();
    v.sort_unstable();
    kafka_coordination_examples::stats::quantile(&v, q)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::tests::{feed, ledger};

    const ALL: Window = Window {
        from: i64::MIN,
        to: i64::MAX,
    };

    #[test]
    fn a_hand_over_is_a_gap_from_the_end_to_the_next_lead() {
        let mut l = ledger(2);
        let a = l.spawned("a", 1, 0);
        let b = l.spawned("b", 1, 0);
        feed(
            &mut l,
            a,
            &["LEAD r-0 10 1", "LEAD r-1 10 1", "END r-0 100 handover"],
        );
        feed(&mut l, a, &["END r-1 105 handover"]);
        feed(&mut l, b, &["LEAD r-0 130 2", "LEAD r-1 160 2"]);
        let g = gaps(&l, ALL);
        assert_eq!(g.len(), 2);
        assert_eq!((g[0].role, g[0].from, g[0].to), (0, 100, Some(130)));
        assert!(g[0].is_move() && g[0].proc == a);
        assert_eq!(g[1].length(0), 55);
        assert_eq!(max_concurrent(&g, 1000), 2);
        assert_eq!(worst_role(&g, 1000), Some((1, 55)));
        assert_eq!(ended(&l, ALL, EndReason::Handover), 2);
        assert_eq!(ended(&l, Window::new(101, 200), EndReason::Handover), 1);
        // The window takes the gaps that began in it.
        assert_eq!(gaps(&l, Window::new(101, 200)).len(), 1);
        assert!(overlaps(&l).is_empty());
        assert!(terms_not_growing(&l).is_empty());
    }

    #[test]
    fn a_gap_opens_when_the_last_covering_term_ends() {
        let mut l = ledger(1);
        let (a, b, c) = (
            l.spawned("a", 1, 0),
            l.spawned("b", 1, 0),
            l.spawned("c", 1, 0),
        );
        // a leads 10..100; b (fencing it) leads 50..200; c leads from 250; then no one.
        feed(&mut l, a, &["LEAD r-0 10 1"]);
        feed(&mut l, b, &["LEAD r-0 50 2"]);
        feed(&mut l, a, &["END r-0 100 fenced"]);
        feed(&mut l, b, &["END r-0 200 other"]);
        feed(&mut l, c, &["LEAD r-0 250 3", "END r-0 300 resigned"]);
        let g = gaps(&l, ALL);
        assert_eq!(g.len(), 2, "{g:?}");
        assert_eq!((g[0].from, g[0].to, g[0].proc), (200, Some(250), b));
        assert_eq!(g[0].cause, TermEnd::Reported(EndReason::Other));
        assert!(!g[0].is_move());
        assert_eq!((g[1].from, g[1].to), (300, None));
        assert_eq!(g[1].length(400), 100);
        let o = overlaps(&l);
        assert_eq!(o.len(), 1);
        assert_eq!(o[0].kind, OverlapKind::Fenced);
        assert_eq!(o[0].overlap_ms, Some(50));
    }

    #[test]
    fn overlaps_are_fenced_unreported_or_violations() {
        let mut l = ledger(4);
        let (a, b) = (l.spawned("a", 1, 0), l.spawned("b", 1, 0));
        feed(
            &mut l,
            a,
            &[
                "LEAD r-0 10 1",
                "LEAD r-1 10 1",
                "LEAD r-2 10 1",
                "LEAD r-3 10 1",
            ],
        );
        // r-0: a resigned after b's LEAD, and b's term number is not higher: a violation.
        feed(&mut l, b, &["LEAD r-0 50 1"]);
        feed(&mut l, a, &["END r-0 60 resigned"]);
        // r-1: a fenced after b's LEAD: not one.
        feed(&mut l, b, &["LEAD r-1 50 2"]);
        feed(&mut l, a, &["END r-1 70 fenced"]);
        // r-2: a ended before b's LEAD: no overlap.
        feed(&mut l, a, &["END r-2 40 handover"]);
        feed(&mut l, b, &["LEAD r-2 50 2"]);
        // r-3: b leads while a, alive, never ended its term: a violation.
        feed(&mut l, b, &["LEAD r-3 80 2"]);
        let o = overlaps(&l);
        let kinds: Vec<_> = o.iter().map(|o| (o.role, o.kind, o.overlap_ms)).collect();
        assert_eq!(
            kinds,
            vec![
                (0, OverlapKind::Violation, Some(10)),
                (1, OverlapKind::Fenced, Some(20)),
                (3, OverlapKind::Violation, None),
            ]
        );
        // A hand-over reported after a newer term of a higher number: superseded, not a
        // violation.
        let mut l2 = ledger(1);
        let (a2, b2) = (l2.spawned("a", 1, 0), l2.spawned("b", 1, 0));
        feed(&mut l2, a2, &["LEAD r-0 10 5"]);
        feed(&mut l2, b2, &["LEAD r-0 50 9"]);
        feed(&mut l2, a2, &["END r-0 65 handover"]);
        let o = overlaps(&l2);
        assert_eq!(
            (o.len(), o[0].kind, o[0].overlap_ms),
            (1, OverlapKind::Superseded, Some(15))
        );
        // a is killed at 90: its open term of r-3 ends there; b's LEAD at 80 came before, an
        // overlapping report.
        l.killed(a, 90);
        l.closed(a, 95);
        let o = overlaps(&l);
        assert_eq!(
            (o[2].kind, o[2].overlap_ms),
            (OverlapKind::Unreported, Some(10))
        );
    }

    #[test]
    fn takeovers_after_a_kill_are_timed_from_the_kill() {
        let mut l = ledger(4);
        let (a, b, c) = (
            l.spawned("a", 1, 0),
            l.spawned("b", 1, 0),
            l.spawned("c", 1, 0),
        );
        feed(
            &mut l,
            a,
            &["LEAD r-0 10 1", "LEAD r-1 10 1", "LEAD r-2 10 1"],
        );
        feed(&mut l, b, &["LEAD r-3 10 1"]);
        l.killed(a, 1000);
        l.closed(a, 1001);
        feed(&mut l, b, &["LEAD r-0 4100 2", "LEAD r-1 4300 2"]);
        feed(&mut l, c, &["LEAD r-3 20 2"]); // an overlap of b's term: not a take-over
        let mut t = takeovers(&l, a, 1000);
        t.sort();
        assert_eq!(t, vec![(0, Some(3100)), (1, Some(3300)), (2, None)]);
        assert_eq!(covered_at_kill(&l, a, 1000), 0);
        // No role of a: b's r-3 is not counted.
        assert!(takeovers(&l, b, 1000).is_empty());
        assert_eq!(quantile(&[3300, 3100], 0.5), 3300);
        assert_eq!(quantile(&[3300, 3100], 0.0), 3100);
        // Killed terms that ended before any successor are not overlaps.
        assert!(overlaps(&l)
            .iter()
            .all(|o| o.kind == OverlapKind::Violation && o.role == 3));
    }

    #[test]
    fn shares_count_live_processes_only() {
        let mut l = ledger(9);
        let (a, b, c) = (
            l.spawned("a", 1, 0),
            l.spawned("b", 1, 0),
            l.spawned("c", 1, 0),
        );
        for (p, roles) in [(a, 0..3), (b, 3..6), (c, 6..9)] {
            for r in roles {
                l.line(p, &format!("LEAD r-{r} 1 1"), 1);
            }
        }
        let (counts, ok) = shares(&l, 0.02);
        assert_eq!(counts, vec![(a, 3), (b, 3), (c, 3)]);
        assert!(ok);
        l.killed(c, 5);
        let (counts, ok) = shares(&l, 0.02);
        assert_eq!(counts, vec![(a, 3), (b, 3)]);
        assert!(!ok, "3 of 9 is not within 2 % of 4.5");
        assert!(shares(&l, 0.5).1);
        assert_eq!(l.unled(), 3);
        assert!(within(1020, 1000.0, 0.02) && !within(1021, 1000.0, 0.02));
        assert!(within(980, 1000.0, 0.02) && !within(979, 1000.0, 0.02));
    }

    #[test]
    fn roles_in_motion_from_stats_and_request_rates() {
        let mut l = ledger(10);
        let (a, b) = (l.spawned("a", 1, 0), l.spawned("b", 1, 0));
        feed(
            &mut l,
            a,
            &[
                "STATS 1000 leading=5 preferred=5 in_motion=0 requests=100",
                "STATS 2000 leading=5 preferred=5 in_motion=4 requests=300",
                "STATS 3000 leading=5 preferred=5 in_motion=1 requests=500",
            ],
        );
        feed(
            &mut l,
            b,
            &[
                "STATS 1500 leading=5 preferred=5 in_motion=3",
                "STATS 2500 leading=5 preferred=5 in_motion=0",
            ],
        );
        // At 2000: a 4 + b 3.
        assert_eq!(stats_in_motion(&l, ALL), (7, 4));
        assert_eq!(stats_in_motion(&l, Window::new(2100, 5000)), (1, 1));
        // a: 400 requests in 2 s over 10 roles.
        assert_eq!(requests_per_role(&l, ALL, 10), Some(20.0));
        assert_eq!(requests_per_role(&l, Window::new(2500, 5000), 10), None);
    }

    #[test]
    fn term_numbers_must_grow_from_one_process_to_the_next() {
        let mut l = ledger(1);
        let (a, b) = (l.spawned("a", 1, 0), l.spawned("b", 1, 0));
        feed(&mut l, a, &["LEAD r-0 10 5", "END r-0 20 handover"]);
        feed(&mut l, b, &["LEAD r-0 30 5"]);
        assert_eq!(terms_not_growing(&l), vec![(0, 5, 5)]);
    }
}
