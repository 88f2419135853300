//! The network faults' liveness figures (`run --net-faults`): every fault with what it did.
//!
//! For each fault: the time from the cut to the first acknowledged guarded write begun after
//! it, per role concerned (the roles the target led, or every role for a fault not aimed at a
//! leader): "a leader that can write"; for a fault aimed at a leader, when the cut-off leader
//! reported its term ended, measured from the heal (negative: it learned while still cut);
//! the writes it had acknowledged while cut; and the terms that ended during the fault's
//! episode with no fault aimed at them ("terms lost").

use std::collections::BTreeMap;

use crate::journal::Journals;
use crate::liveness::{spread, FaultKind, Term};

/// What the network figures found, for the verdict.
#[derive(Default)]
pub struct NetFigures {
    /// Faults listed.
    pub faults: usize,
    /// Terms lost to faults not aimed at a leader.
    pub lost_to_others: usize,
}

/// Prints the per-fault figures of the run's network faults.
pub fn print(j: &Journals, terms: &[(String, Term)], episode_end: &[i64]) -> NetFigures {
    let mut out = NetFigures::default();
    let net: Vec<usize> = (0..j.faults.len())
        .filter(|&i| j.faults[i].kind.is_net())
        .collect();
    if net.is_empty() {
        return out;
    }
    let roles: Vec<String> = j
        .config
        .get("roles")
        .map(|r| r.split(',').map(str::to_owned).collect())
        .unwrap_or_default();
    let short = |role: &str| {
        roles
            .iter()
            .position(|r| r == role)
            .map_or_else(|| role.to_owned(), |i| format!("r{i}"))
    };
    println!(
        "  network     every fault: to a writing leader = cut to the first acknowledged write \
         begun after it (per role concerned); learned = the cut-off leader's term-ended report \
         minus the heal; lost = terms ended in the episode with no fault aimed at them"
    );
    // Per kind: (to a writing leader, learned, lost).
    let mut by_kind: BTreeMap<FaultKind, (Vec<i64>, Vec<i64>, usize, usize)> = BTreeMap::new();
    for i in net {
        let f = &j.faults[i];
        let end = episode_end[i];
        let heal = j.heals.get(&f.n).copied().unwrap_or(end);
        let concerned: Vec<String> = if f.kind.at_leader() {
            f.led.iter().map(|(r, _)| r.clone()).collect()
        } else {
            roles.clone()
        };
        let mut writes = Vec::new();
        let mut worst: Option<i64> = Some(0);
        for role in &concerned {
            let first = j
                .ack_times
                .iter()
                .filter(|(at, began, r, _)| r == role && *began >= f.at && *at <= end)
                .map(|(at, _, _, _)| at - f.at)
                .min();
            writes.push(format!(
                "{} {}",
                short(role),
                first.map_or("none in the episode".to_owned(), |ms| format!("{ms} ms"))
            ));
            worst = match (worst, first) {
                (Some(w), Some(ms)) => Some(w.max(ms)),
                _ => None,
            };
        }
        let mut learned = Vec::new();
        let mut learned_ms = Vec::new();
        for (role, pair) in &f.led {
            let ended = j
                .ended
                .iter()
                .filter(|(at, r, p)| r == role && p == pair && *at >= f.at)
                .map(|(at, _, _)| *at)
                .min();
            // Only a term whose successor began in the fault's episode was lost to it.
            let deposed = terms.iter().any(|(r, t)| {
                r == role && t.pair == *pair && t.next_start.is_some_and(|s| s <= end)
            });
            learned.push(match ended {
                Some(at) if deposed => {
                    learned_ms.push(at - heal);
                    format!("{} {:+} ms", short(role), at - heal)
                }
                None if deposed => format!("{} never reported", short(role)),
                _ => format!("{} kept its term", short(role)),
            });
        }
        let acked_while_cut = f.instance.map_or(0, |inst| {
            j.ack_times
                .iter()
                .filter(|(at, began, _, who)| *who as u64 == inst && *began >= f.at && *at <= heal)
                .count()
        });
        let lost = terms
            .iter()
            .filter(|(r, t)| {
                t.next_start.is_some_and(|s| s >= f.at && s <= end)
                    && !f.led.iter().any(|(lr, p)| lr == r && *p == t.pair)
            })
            .count();
        if !f.kind.at_leader() {
            out.lost_to_others += lost;
        }
        let (nodes, peers) = j.cuts.get(&f.n).cloned().unwrap_or_default();
        println!(
            "    #{:<3} {:<28} {nodes} from {peers}, healed after {} ms | to a writing leader: \
             {} | learned: {} | acked while cut: {acked_while_cut} | lost: {lost}",
            f.n,
            f.kind.name(),
            heal - f.at,
            writes.join(", "),
            if learned.is_empty() {
                "-".to_owned()
            } else {
                learned.join(", ")
            }
        );
        let e = by_kind.entry(f.kind).or_default();
        if let Some(w) = worst {
            e.0.push(w);
        } else {
            e.3 += 1;
        }
        e.1.extend(learned_ms);
        e.2 += lost;
        out.faults += 1;
    }
    println!(
        "  per kind    (median / p90 / max ms) to a writing leader | learned after the heal | \
         terms lost"
    );
    for (kind, (writes, learned, lost, stuck)) in &by_kind {
        println!(
            "    {:<28} {} ({} without a write in the episode) | {} | {lost}",
            kind.name(),
            spread(writes.iter().copied()),
            stuck,
            if learned.is_empty() {
                "-".to_owned()
            } else {
                spread(learned.iter().copied())
            }
        );
    }
    println!(
        "  lost        terms ended by network faults not aimed at a leader: {}",
        out.lost_to_others
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::Pair;
    use crate::liveness::Fault;

    fn term(pair: Pair, first_write: i64, next_start: Option<i64>) -> (String, Term) {
        (
            "r".to_owned(),
            Term {
                term: first_write,
                member: "m".to_owned(),
                pair,
                first_write,
                granted_at: first_write,
                last_deadline: first_write + 2000,
                longest_gap: 0,
                rank: 0,
                next_start,
                cleared: false,
            },
        )
    }

    #[test]
    fn a_term_lost_to_a_standby_cut_counts_and_the_cut_leaders_own_does_not() {
        let old = Pair {
            producer_id: 1,
            epoch: 0,
        };
        let new = Pair {
            producer_id: 1,
            epoch: 1,
        };
        let mut j = Journals::default();
        j.config.insert("roles".to_owned(), "r".to_owned());
        // Fault 1 cuts the leader of `old`, which is deposed in its episode; fault 2 cuts a
        // standby, and the term of `new` ends in its episode.
        j.faults = vec![
            Fault {
                n: 1,
                at: 1000,
                kind: FaultKind::CutLeaderFromAll,
                instance: Some(1),
                led: vec![("r".to_owned(), old)],
            },
            Fault {
                n: 2,
                at: 10_000,
                kind: FaultKind::CutStandby,
                instance: Some(2),
                led: Vec::new(),
            },
        ];
        j.heals.insert(1, 6000);
        j.heals.insert(2, 15_000);
        j.ended.push((6500, "r".to_owned(), old));
        let third = Pair {
            producer_id: 1,
            epoch: 2,
        };
        let terms = vec![
            term(old, 0, Some(3500)),
            term(new, 3500, Some(12_000)),
            term(third, 12_000, None),
        ];
        let figures = print(&j, &terms, &[10_000, 20_000]);
        assert_eq!(figures.faults, 2);
        assert_eq!(figures.lost_to_others, 1);
    }
}
