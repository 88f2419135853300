//! The checker's safety verdicts. They are exact and come from the committed logs alone:
//!
//! * **pairs never go back**: in a role's data partition (read_committed, offset order), once a
//!   record of another pair follows a pair, that pair never appears again; the same holds for
//!   the lease records of the role in the state topic ([`terms_of`](crate::liveness::terms_of));
//! * **one member per pair**: every record of a pair comes from one member process;
//! * **terms only grow**: a pair's records carry one term, and a new pair's term is larger than
//!   the previous pair's; the term is the offset of that pair's first lease record;
//! * **no write twice, none out of order**: a member process's sequence numbers strictly grow
//!   along the partition;
//! * **no acknowledged write is missing**: every write a member journaled as acknowledged is
//!   at its returned offset, with its tag.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use crate::format::{Pair, Tag};

/// A record of a role's data partition: its offset and value.
#[derive(Clone, Debug)]
pub struct DataRecord {
    pub offset: i64,
    pub value: Option<Vec<u8>>,
}

/// A write a member journaled as acknowledged (the guarded write returned its offset).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ack {
    pub role: String,
    pub offset: i64,
    pub instance: u64,
    pub seq: u64,
    pub pair: Pair,
    pub term: i64,
}

/// A way in which the logs contradict a guarantee.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Violation {
    /// A data record that is not a chaos tag of this role.
    Malformed {
        role: String,
        offset: i64,
        why: String,
    },
    /// A pair came back after another pair had written.
    PairWentBack {
        role: String,
        log: &'static str,
        offset: i64,
        pair: Pair,
        first_offset: i64,
        after: Pair,
    },
    /// Two member processes wrote with one pair.
    PairFromTwoMembers {
        role: String,
        pair: Pair,
        offset: i64,
        first: String,
        other: String,
    },
    /// A new pair's term is not larger than the previous pair's.
    TermWentBack {
        role: String,
        offset: i64,
        pair: Pair,
        term: i64,
        previous_pair: Pair,
        previous_term: i64,
    },
    /// A pair's records carry more than one term, or a term that is not the offset of the
    /// pair's first lease record.
    WrongTerm {
        role: String,
        offset: i64,
        pair: Pair,
        term: i64,
        expected: Option<i64>,
    },
    /// A member process's sequence numbers did not strictly grow (a duplicate or a reorder).
    SequenceWentBack {
        role: String,
        offset: i64,
        instance: u64,
        seq: u64,
        previous: u64,
    },
    /// An acknowledged write is not at its offset.
    AckMissing { ack: Ack, found: String },
}

impl Violation {
    /// A short name of the kind, for the summary.
    pub fn kind(&self) -> &'static str {
        match self {
            Violation::Malformed { .. } => "malformed record",
            Violation::PairWentBack { .. } => "pair went back",
            Violation::PairFromTwoMembers { .. } => "pair from two members",
            Violation::TermWentBack { .. } => "term went back",
            Violation::WrongTerm { .. } => "wrong term",
            Violation::SequenceWentBack { .. } => "sequence went back",
            Violation::AckMissing { .. } => "acknowledged write missing",
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::Malformed { role, offset, why } => {
                write!(
                    f,
                    "role {role}: the data record at offset {offset} is malformed: {why}"
                )
            }
            Violation::PairWentBack {
                role,
                log,
                offset,
                pair,
                first_offset,
                after,
            } => write!(
                f,
                "role {role}: pair {pair} wrote again at offset {offset} of the {log} log after \
                 pair {after} had written (its first record was at {first_offset})"
            ),
            Violation::PairFromTwoMembers {
                role,
                pair,
                offset,
                first,
                other,
            } => write!(
                f,
                "role {role}: pair {pair} wrote from {other} at offset {offset}, but its \
                 earlier records came from {first}"
            ),
            Violation::TermWentBack {
                role,
                offset,
                pair,
                term,
                previous_pair,
                previous_term,
            } => {
                write!(
                    f,
                    "role {role}: pair {pair} wrote term {term} at offset {offset}, after pair \
                     {previous_pair} wrote the larger or equal term {previous_term}"
                )
            }
            Violation::WrongTerm {
                role,
                offset,
                pair,
                term,
                expected,
            } => match expected {
                Some(e) => write!(
                    f,
                    "role {role}: the record at offset {offset} carries term {term} for pair \
                     {pair}, whose term is {e}"
                ),
                None => write!(
                    f,
                    "role {role}: the record at offset {offset} carries pair {pair} (term \
                     {term}), which wrote no lease record: it was never elected"
                ),
            },
            Violation::SequenceWentBack {
                role,
                offset,
                instance,
                seq,
                previous,
            } => write!(
                f,
                "role {role}: member process #{instance} wrote seq {seq} at offset {offset} \
                 after seq {previous} (a duplicate or a reorder)"
            ),
            Violation::AckMissing { ack, found } => write!(
                f,
                "role {}: the write acknowledged to #{} (seq {}, pair {}, term {}) at offset {} \
                 is missing: {found}",
                ack.role, ack.instance, ack.seq, ack.pair, ack.term, ack.offset
            ),
        }
    }
}

/// What [`check_data`] counted besides the violations.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DataFigures {
    pub records: usize,
    pub pairs: usize,
    pub acks: usize,
}

/// Checks one role's data partition (read_committed, offset order) against the safety
/// properties, and every acknowledged write of the role against the partition. `terms` (pair
/// -> term, from the state log) adds the check that every pair was elected with that term.
pub fn check_data(
    role: &str,
    records: &[DataRecord],
    acks: &[Ack],
    terms: Option<&HashMap<Pair, i64>>,
) -> (DataFigures, Vec<Violation>) {
    let mut violations = Vec::new();
    // pair -> (first offset, writer, term)
    let mut pairs: HashMap<Pair, (i64, String, i64)> = HashMap::new();
    let mut current: Option<(Pair, i64)> = None;
    let mut last_seq: HashMap<u64, u64> = HashMap::new();
    let mut by_offset: BTreeMap<i64, Tag> = BTreeMap::new();
    let mut by_write: HashMap<(u64, u64), i64> = HashMap::new();
    for r in records {
        let tag = match r.value.as_deref().map(Tag::parse) {
            Some(Ok(tag)) if tag.role == role => tag,
            Some(Ok(tag)) => {
                violations.push(Violation::Malformed {
                    role: role.to_owned(),
                    offset: r.offset,
                    why: format!("it is tagged for role {}", tag.role),
                });
                continue;
            }
            Some(Err(why)) => {
                violations.push(Violation::Malformed {
                    role: role.to_owned(),
                    offset: r.offset,
                    why,
                });
                continue;
            }
            None => {
                violations.push(Violation::Malformed {
                    role: role.to_owned(),
                    offset: r.offset,
                    why: "a tombstone".to_owned(),
                });
                continue;
            }
        };
        let writer = format!("{}#{}", tag.member, tag.instance);
        match pairs.get(&tag.pair) {
            Some((first_offset, first_writer, first_term)) => {
                if let Some((now, _)) = current.filter(|(p, _)| *p != tag.pair) {
                    violations.push(Violation::PairWentBack {
                        role: role.to_owned(),
                        log: "data",
                        offset: r.offset,
                        pair: tag.pair,
                        first_offset: *first_offset,
                        after: now,
                    });
                }
                if *first_writer != writer {
                    violations.push(Violation::PairFromTwoMembers {
                        role: role.to_owned(),
                        pair: tag.pair,
                        offset: r.offset,
                        first: first_writer.clone(),
                        other: writer.clone(),
                    });
                }
                if *first_term != tag.term {
                    violations.push(Violation::WrongTerm {
                        role: role.to_owned(),
                        offset: r.offset,
                        pair: tag.pair,
                        term: tag.term,
                        expected: Some(*first_term),
                    });
                }
            }
            None => {
                if let Some((previous_pair, previous_term)) = current {
                    if tag.term <= previous_term {
                        violations.push(Violation::TermWentBack {
                            role: role.to_owned(),
                            offset: r.offset,
                            pair: tag.pair,
                            term: tag.term,
                            previous_pair,
                            previous_term,
                        });
                    }
                }
                if let Some(terms) = terms {
                    let expected = terms.get(&tag.pair).copied();
                    if expected != Some(tag.term) {
                        violations.push(Violation::WrongTerm {
                            role: role.to_owned(),
                            offset: r.offset,
                            pair: tag.pair,
                            term: tag.term,
                            expected,
                        });
                    }
                }
                pairs.insert(tag.pair, (r.offset, writer, tag.term));
            }
        }
        // Only the pair's first term moves `current`'s term, so a wrong term is reported once.
        let term = pairs.get(&tag.pair).map_or(tag.term, |p| p.2);
        current = Some((tag.pair, term));
        if let Some(previous) = last_seq.insert(tag.instance, tag.seq) {
            if tag.seq <= previous {
                violations.push(Violation::SequenceWentBack {
                    role: role.to_owned(),
                    offset: r.offset,
                    instance: tag.instance,
                    seq: tag.seq,
                    previous,
                });
            }
        }
        by_write.entry((tag.instance, tag.seq)).or_insert(r.offset);
        by_offset.insert(r.offset, tag);
    }
    let mut acked = 0;
    for ack in acks.iter().filter(|a| a.role == role) {
        acked += 1;
        let offset = if ack.offset >= 0 {
            Some(ack.offset)
        } else {
            by_write.get(&(ack.instance, ack.seq)).copied()
        };
        let found = offset.and_then(|o| by_offset.get(&o));
        let matches = found.is_some_and(|t| {
            t.instance == ack.instance
                && t.seq == ack.seq
                && t.pair == ack.pair
                && t.term == ack.term
        });
        if !matches {
            let found = match (found, offset) {
                (Some(t), Some(o)) => format!(
                    "offset {o} holds #{} seq {} pair {} term {} instead",
                    t.instance, t.seq, t.pair, t.term
                ),
                (None, Some(o)) => match by_write.get(&(ack.instance, ack.seq)) {
                    // The record is there, at another offset than the client reported.
                    Some(at) => format!("no committed record at offset {o}; the write is at {at}"),
                    None => format!(
                        "no committed record at offset {o}, nor anywhere else; committed \
                         records around it: {}",
                        by_offset
                            .range(o - 3..=o + 3)
                            .map(|(at, t)| format!("{at} (#{} seq {})", t.instance, t.seq))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                },
                _ => "no committed record of that write".to_owned(),
            };
            violations.push(Violation::AckMissing {
                ack: ack.clone(),
                found,
            });
        }
    }
    (
        DataFigures {
            records: records.len(),
            pairs: pairs.len(),
            acks: acked,
        },
        violations,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROLE: &str = "r0";

    fn pair(id: i64, epoch: i16) -> Pair {
        Pair {
            producer_id: id,
            epoch,
        }
    }

    fn tag(instance: u64, pair: Pair, term: i64, seq: u64) -> Tag {
        Tag {
            role: ROLE.into(),
            member: format!("m{instance}"),
            instance,
            pair,
            term,
            seq,
        }
    }

    /// A data log of the tags, at offsets 0, 2, 4, ... (transaction markers in between).
    fn log(tags: &[Tag]) -> Vec<DataRecord> {
        tags.iter()
            .enumerate()
            .map(|(i, t)| DataRecord {
                offset: 2 * i as i64,
                value: Some(t.value().into_bytes()),
            })
            .collect()
    }

    fn ack_of(t: &Tag, offset: i64) -> Ack {
        Ack {
            role: t.role.clone(),
            offset,
            instance: t.instance,
            seq: t.seq,
            pair: t.pair,
            term: t.term,
        }
    }

    /// A clean history: m1 leads with 100/0 (term 5), m2 takes over with 100/1 (term 9), m1
    /// (restarted as #3) with 200/0 (term 20); every write acknowledged.
    fn clean() -> (Vec<Tag>, Vec<Ack>) {
        let tags = vec![
            tag(1, pair(100, 0), 5, 1),
            tag(1, pair(100, 0), 5, 2),
            tag(2, pair(100, 1), 9, 1),
            tag(2, pair(100, 1), 9, 4),
            tag(3, pair(200, 0), 20, 1),
        ];
        let acks = tags
            .iter()
            .enumerate()
            .map(|(i, t)| ack_of(t, 2 * i as i64))
            .collect();
        (tags, acks)
    }

    fn kinds(v: &[Violation]) -> Vec<&'static str> {
        v.iter().map(Violation::kind).collect()
    }

    #[test]
    fn a_clean_history_passes() {
        let (tags, acks) = clean();
        let terms: HashMap<Pair, i64> =
            [(pair(100, 0), 5), (pair(100, 1), 9), (pair(200, 0), 20)].into();
        let (figures, v) = check_data(ROLE, &log(&tags), &acks, Some(&terms));
        assert_eq!(v, vec![]);
        assert_eq!(
            figures,
            DataFigures {
                records: 5,
                pairs: 3,
                acks: 5
            }
        );
    }

    #[test]
    fn a_pair_that_comes_back_is_caught() {
        let (mut tags, _) = clean();
        // The deposed m1 writes once more after m2 took over.
        tags.insert(4, tag(1, pair(100, 0), 5, 3));
        let (_, v) = check_data(ROLE, &log(&tags), &[], None);
        assert_eq!(kinds(&v), ["pair went back"], "{v:?}");
        assert!(
            v[0].to_string()
                .contains("pair 100/0 wrote again at offset 8"),
            "{}",
            v[0]
        );
    }

    #[test]
    fn a_pair_written_by_two_members_is_caught() {
        let (mut tags, _) = clean();
        tags[3].instance = 7;
        tags[3].member = "m7".into();
        let (_, v) = check_data(ROLE, &log(&tags), &[], None);
        assert_eq!(kinds(&v), ["pair from two members"], "{v:?}");
    }

    #[test]
    fn a_term_that_goes_back_or_changes_is_caught() {
        let (mut tags, _) = clean();
        tags[4].term = 9; // 200/0 claims a term not larger than 100/1's
        tags[4].seq = 1;
        let (_, v) = check_data(ROLE, &log(&tags), &[], None);
        assert_eq!(kinds(&v), ["term went back"], "{v:?}");

        let (mut tags, _) = clean();
        tags[1].term = 6; // one pair, two terms
        let (_, v) = check_data(ROLE, &log(&tags), &[], None);
        assert_eq!(kinds(&v), ["wrong term"], "{v:?}");

        // A pair the state log never elected, and one whose term is not its first lease.
        let (tags, _) = clean();
        let terms: HashMap<Pair, i64> = [(pair(100, 0), 5), (pair(100, 1), 8)].into();
        let (_, v) = check_data(ROLE, &log(&tags), &[], Some(&terms));
        assert_eq!(kinds(&v), ["wrong term", "wrong term"], "{v:?}");
        assert!(v[1].to_string().contains("never elected"), "{}", v[1]);
    }

    #[test]
    fn a_duplicate_or_reordered_write_is_caught() {
        let (mut tags, _) = clean();
        tags[1].seq = 1; // the same write twice
        let (_, v) = check_data(ROLE, &log(&tags), &[], None);
        assert_eq!(kinds(&v), ["sequence went back"], "{v:?}");
    }

    #[test]
    fn a_missing_or_different_acknowledged_write_is_caught() {
        let (tags, mut acks) = clean();
        // An acknowledged write whose record is not in the committed log at all.
        let lost = Ack {
            offset: 10,
            seq: 5,
            ..acks[4].clone()
        };
        acks.push(lost);
        // One whose offset holds another write.
        acks[2].seq = 2;
        // One acknowledged without an offset, found by its sequence number; and one not found.
        acks.push(Ack {
            offset: -1,
            ..acks[0].clone()
        });
        acks.push(Ack {
            offset: -1,
            seq: 99,
            ..acks[0].clone()
        });
        let (figures, v) = check_data(ROLE, &log(&tags), &acks, None);
        assert_eq!(figures.acks, 8);
        assert_eq!(kinds(&v), ["acknowledged write missing"; 3], "{v:?}");
        let text: Vec<String> = v.iter().map(ToString::to_string).collect();
        assert!(text[0].contains("holds #2 seq 1"), "{text:?}");
        assert!(
            text[1].contains("no committed record at offset 10"),
            "{text:?}"
        );
        assert!(
            text[2].contains("no committed record of that write"),
            "{text:?}"
        );
    }

    #[test]
    fn malformed_and_foreign_records_are_caught() {
        let (tags, _) = clean();
        let mut records = log(&tags);
        records.push(DataRecord {
            offset: 11,
            value: Some(b"hello".to_vec()),
        });
        records.push(DataRecord {
            offset: 12,
            value: None,
        });
        let mut other = tags[4].clone();
        other.role = "r1".into();
        other.seq = 2;
        records.push(DataRecord {
            offset: 13,
            value: Some(other.value().into_bytes()),
        });
        let (_, v) = check_data(ROLE, &records, &[], None);
        assert_eq!(kinds(&v), ["malformed record"; 3], "{v:?}");
    }
}
