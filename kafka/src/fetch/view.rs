//! The committed records of one partition that a read serves, compacted by key behind a tail.

use std::collections::{BTreeMap, HashMap};

use crate::batch::Decoded;
use kafka_coordination_transport::Record;

/// Superseded records within this many offsets of a view's end stay in it.
const TAIL: i64 = 4096;
/// How many superseded records a view accumulates between two compactions.
const COMPACT_EVERY: usize = 1024;

/// The committed records of one partition that a read serves, compacted by key behind a tail.
pub(crate) struct View {
    /// offset -> record.
    records: BTreeMap<i64, Record>,
    /// key -> the offset of its latest record.
    latest: HashMap<Vec<u8>, i64>,
    /// Records in `records` that a later record of their key superseded.
    superseded: usize,
    /// Compact when `superseded` reaches this.
    compact_at: usize,
    /// The offset after the last one covered: where the next Fetch starts.
    pub(super) end: i64,
}

impl View {
    pub(crate) fn starting_at(end: i64) -> View {
        View {
            records: BTreeMap::new(),
            latest: HashMap::new(),
            superseded: 0,
            compact_at: COMPACT_EVERY,
            end,
        }
    }

    /// Adds the records of a Fetch from `self.end`.
    pub(crate) fn append(&mut self, decoded: Decoded) {
        for r in decoded.records {
            if r.offset < self.end {
                continue;
            }
            if let Some(old) = self.latest.insert(r.key.clone(), r.offset) {
                if self.records.contains_key(&old) {
                    self.superseded += 1;
                }
            }
            self.records.insert(r.offset, r);
        }
        self.end = self.end.max(decoded.next);
        if self.superseded >= self.compact_at {
            self.compact();
        }
    }

    /// Drops the superseded records more than [`TAIL`] offsets behind the end.
    fn compact(&mut self) {
        let horizon = self.end.saturating_sub(TAIL);
        let stale: Vec<i64> = self
            .records
            .range(..horizon)
            .filter(|(offset, r)| self.latest.get(&r.key) != Some(offset))
            .map(|(offset, _)| *offset)
            .collect();
        for offset in &stale {
            self.records.remove(offset);
        }
        self.superseded -= stale.len();
        self.compact_at = self.superseded + COMPACT_EVERY;
    }

    pub(super) fn has_since(&self, from: i64) -> bool {
        self.records.range(from..).next().is_some()
    }

    pub(crate) fn since(&self, from: i64) -> Vec<Record> {
        self.records.range(from..).map(|(_, r)| r.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(offset: i64, key: &str, value: Option<&str>) -> Record {
        Record {
            offset,
            key: key.as_bytes().to_vec(),
            value: value.map(|v| v.as_bytes().to_vec()),
        }
    }

    #[test]
    fn the_view_keeps_the_latest_record_of_each_key_behind_its_tail() {
        let mut v = View::starting_at(0);
        let mut records = Vec::new();
        let n = i64::try_from(COMPACT_EVERY).expect("small") + TAIL + 10;
        for o in 0..n {
            // Key "a" every other offset, a unique key otherwise; "t" once, tombstoned late.
            let r = match o {
                1 => rec(o, "t", Some("x")),
                o if o == n - 1 => rec(o, "t", None),
                o if o % 2 == 0 => rec(o, "a", Some(&o.to_string())),
                o => rec(o, &format!("u{o}"), Some("u")),
            };
            records.push(r);
        }
        v.append(Decoded {
            records: records[..10].to_vec(),
            next: 10,
            ..Decoded::default()
        });
        assert_eq!(v.since(0), records[..10].to_vec(), "nothing compacted yet");
        v.append(Decoded {
            records: records[10..].to_vec(),
            next: n + 5,
            ..Decoded::default()
        });
        assert_eq!(v.end, n + 5, "the end covers skipped markers");
        let all = v.since(0);
        assert!(all.windows(2).all(|w| w[0].offset < w[1].offset));
        let horizon = v.end - TAIL;
        // Behind the tail: one record of "a" (none: its latest is in the tail), every unique key.
        assert!(all
            .iter()
            .filter(|r| r.offset < horizon)
            .all(|r| r.key.starts_with(b"u")));
        // Within the tail: everything.
        assert_eq!(
            all.iter().filter(|r| r.offset >= horizon).count(),
            records.iter().filter(|r| r.offset >= horizon).count()
        );
        assert_eq!(all.last(), records.last(), "the tombstone is kept");
        assert!(
            !all.iter().any(|r| r.offset == 1),
            "the superseded 't' is gone"
        );
        // Same final state per key.
        let last_of = |rs: &[Record]| {
            let mut m = HashMap::new();
            for r in rs {
                m.insert(r.key.clone(), r.value.clone());
            }
            m
        };
        assert_eq!(last_of(&all), last_of(&records));
        assert!(v.has_since(n - 1));
        assert!(!v.has_since(n));
        // Records before the view's end are not taken twice.
        v.append(Decoded {
            records: vec![rec(3, "z", Some("old"))],
            next: 4,
            ..Decoded::default()
        });
        assert_eq!(v.since(0), all);
        assert_eq!(v.end, n + 5);
    }
}
