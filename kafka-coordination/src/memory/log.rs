//! One partition of `__coordination_state`: an append-only log with transactional records,
//! control markers, a last stable offset and compaction.
//!
//! Offsets are assigned at append and never change: compaction removes entries but keeps the
//! offsets of the ones it retains, so the log may have gaps (as a compacted Kafka log has, and as
//! control markers make even without compaction).

use std::collections::{BTreeMap, HashMap};

use kafka_coordination_core::token::FencingToken;

use crate::transport::{ReadBatch, Record};

/// Where a transactional record stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TxnStatus {
    /// Its transaction is open: the record holds back the last stable offset.
    Open,
    /// Its transaction committed: the record is visible to read_committed readers.
    Committed,
    /// Its transaction aborted: the record is never visible.
    Aborted,
}

/// What an entry of the log is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// A record of a plain (non-transactional) producer: visible once below the LSO.
    Plain,
    /// A record written inside a transaction of `producer`.
    Transactional {
        producer: FencingToken,
        status: TxnStatus,
    },
    /// A commit or abort control marker: takes an offset, never returned to readers.
    Marker,
}

#[derive(Clone, Debug)]
struct Entry {
    offset: i64,
    key: Vec<u8>,
    value: Option<Vec<u8>>,
    kind: Kind,
}

impl Entry {
    /// Whether a read_committed reader sees this entry (when it is below the LSO).
    fn visible(&self) -> bool {
        matches!(
            self.kind,
            Kind::Plain
                | Kind::Transactional {
                    status: TxnStatus::Committed,
                    ..
                }
        )
    }

    fn is_tombstone(&self) -> bool {
        self.value.as_deref().is_none_or(<[u8]>::is_empty)
    }

    fn to_record(&self) -> Record {
        Record {
            offset: self.offset,
            key: self.key.clone(),
            value: self.value.clone(),
        }
    }
}

/// One partition's log.
#[derive(Debug, Default)]
pub(super) struct PartitionLog {
    /// Entries in offset order (offsets strictly increasing, possibly with gaps).
    entries: Vec<Entry>,
    /// The next offset to assign: the log end offset (high watermark).
    end: i64,
    /// Open transactions with records here: producer pair -> offset of its first record here.
    /// Keyed by (producer id, epoch): a map key, not an order of terms.
    open: BTreeMap<(i64, i16), i64>,
}

impl PartitionLog {
    /// The log end offset: the offset the next append gets.
    pub(super) fn end_offset(&self) -> i64 {
        self.end
    }

    /// The last stable offset: the first offset of the oldest open transaction, or the log end.
    pub(super) fn last_stable_offset(&self) -> i64 {
        self.open.values().copied().min().unwrap_or(self.end)
    }

    /// How many entries (records and markers) the log holds.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    fn push(&mut self, key: &[u8], value: Option<&[u8]>, kind: Kind) -> i64 {
        let offset = self.end;
        self.entries.push(Entry {
            offset,
            key: key.to_vec(),
            value: value.map(<[u8]>::to_vec),
            kind,
        });
        self.end += 1;
        offset
    }

    /// Appends a record of a plain producer and returns its offset.
    pub(super) fn append(&mut self, key: &[u8], value: Option<&[u8]>) -> i64 {
        self.push(key, value, Kind::Plain)
    }

    /// Appends a record inside the open transaction of `producer` and returns its offset.
    pub(super) fn append_transactional(
        &mut self,
        key: &[u8],
        value: Option<&[u8]>,
        producer: FencingToken,
    ) -> i64 {
        let offset = self.push(
            key,
            value,
            Kind::Transactional {
                producer,
                status: TxnStatus::Open,
            },
        );
        self.open
            .entry((producer.producer_id, producer.producer_epoch))
            .or_insert(offset);
        offset
    }

    /// Ends the open transaction of `producer` in this partition: its records become committed
    /// (visible) or aborted (invisible forever), and a control marker is appended. Returns
    /// whether the transaction had records here.
    pub(super) fn end_transaction(&mut self, producer: FencingToken, commit: bool) -> bool {
        let Some(first) = self
            .open
            .remove(&(producer.producer_id, producer.producer_epoch))
        else {
            return false;
        };
        let start = self.entries.partition_point(|e| e.offset < first);
        let outcome = if commit {
            TxnStatus::Committed
        } else {
            TxnStatus::Aborted
        };
        for entry in &mut self.entries[start..] {
            if let Kind::Transactional {
                producer: p,
                status,
            } = &mut entry.kind
            {
                if *p == producer && *status == TxnStatus::Open {
                    *status = outcome;
                }
            }
        }
        self.push(&[], None, Kind::Marker);
        true
    }

    /// A read_committed read: visible records at offsets `>= from` and below the LSO, in
    /// offset order. A negative `from` reads from the start. `end_offset` is the LSO, or `from`
    /// when `from` lies past the LSO (the reader keeps its position, as a Kafka consumer does);
    /// `stalled` when an open transaction holds the LSO below the log end.
    /// The caller checks that `from` is not past the log end.
    pub(super) fn read(&self, from: i64) -> ReadBatch {
        let from = from.max(0);
        let lso = self.last_stable_offset();
        let start = self.entries.partition_point(|e| e.offset < from);
        let records = self.entries[start..]
            .iter()
            .take_while(|e| e.offset < lso)
            .filter(|e| e.visible())
            .map(Entry::to_record)
            .collect();
        ReadBatch {
            records,
            end_offset: lso.max(from),
            stalled: lso < self.end,
            high_watermark: Some(self.end.max(from)),
        }
    }

    /// Compacts the part of the log below the LSO: keeps the latest visible record of every key
    /// (offsets unchanged), drops superseded records, aborted records and control markers, and
    /// drops tombstones at offsets below `drop_tombstones_before` when given. Entries at or past
    /// the LSO are untouched. Returns how many entries were removed.
    pub(super) fn compact(&mut self, drop_tombstones_before: Option<i64>) -> usize {
        let lso = self.last_stable_offset();
        let mut latest: HashMap<&[u8], i64> = HashMap::new();
        for e in self
            .entries
            .iter()
            .take_while(|e| e.offset < lso)
            .filter(|e| e.visible())
        {
            latest.insert(e.key.as_slice(), e.offset);
        }
        let keep: Vec<bool> = self
            .entries
            .iter()
            .map(|e| {
                if e.offset >= lso {
                    return true;
                }
                if !e.visible() || latest.get(e.key.as_slice()) != Some(&e.offset) {
                    return false;
                }
                !(e.is_tombstone()
                    && drop_tombstones_before.is_some_and(|before| e.offset < before))
            })
            .collect();
        let before = self.entries.len();
        let mut keep = keep.into_iter();
        self.entries.retain(|_| keep.next().unwrap_or(true));
        before - self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P1: FencingToken = FencingToken::new(7, 0);
    const P2: FencingToken = FencingToken::new(8, 3);

    fn offsets(b: &ReadBatch) -> Vec<i64> {
        b.records.iter().map(|r| r.offset).collect()
    }

    #[test]
    fn open_transaction_holds_back_the_lso_until_it_ends() {
        let mut log = PartitionLog::default();
        assert_eq!(log.append(b"a", Some(b"1")), 0);
        assert_eq!(log.append_transactional(b"l", Some(b"x"), P1), 1);
        assert_eq!(log.append(b"b", Some(b"2")), 2);
        assert_eq!(log.last_stable_offset(), 1);
        assert_eq!(log.end_offset(), 3);
        let b = log.read(0);
        assert_eq!(offsets(&b), [0]);
        assert_eq!(b.end_offset, 1);
        assert!(b.stalled, "records past the LSO are held back");
        assert!(log.end_transaction(P1, false));
        assert!(!log.end_transaction(P1, false), "a transaction ends once");
        let b = log.read(0);
        assert_eq!(
            offsets(&b),
            [0, 2],
            "aborted record and marker are invisible"
        );
        assert_eq!(b.end_offset, 4);
        assert!(!b.stalled);
    }

    #[test]
    fn two_open_transactions_the_oldest_sets_the_lso() {
        let mut log = PartitionLog::default();
        log.append_transactional(b"l1", Some(b"x"), P1);
        log.append_transactional(b"l2", Some(b"y"), P2);
        log.append_transactional(b"l1", Some(b"z"), P1);
        assert_eq!(log.last_stable_offset(), 0);
        log.end_transaction(P2, true);
        assert_eq!(log.last_stable_offset(), 0);
        log.end_transaction(P1, true);
        assert_eq!(log.last_stable_offset(), 5);
        assert_eq!(offsets(&log.read(0)), [0, 1, 2]);
        assert_eq!(offsets(&log.read(2)), [2]);
        assert_eq!(log.read(-5).records.len(), 3);
    }

    #[test]
    fn compaction_keeps_offsets_latest_per_key_and_stops_at_the_lso() {
        let mut log = PartitionLog::default();
        log.append(b"a", Some(b"1")); // 0: superseded
        log.append(b"b", Some(b"1")); // 1: kept
        log.append(b"a", Some(b"2")); // 2: kept
        log.append(b"c", Some(b"1")); // 3: superseded by the tombstone
        log.append(b"c", None); // 4: tombstone, kept
        log.append_transactional(b"a", Some(b"3"), P1); // 5: open, LSO
        log.append(b"b", Some(b"2")); // 6: past the LSO, untouched
        let removed = log.compact(None);
        assert_eq!(removed, 2);
        assert_eq!(offsets(&log.read(0)), [1, 2, 4]);
        assert_eq!(log.len(), 5);
        log.end_transaction(P1, false); // marker at 7
        assert_eq!(offsets(&log.read(0)), [1, 2, 4, 6]);
        let removed = log.compact(Some(5));
        // Removed: b@1 (superseded by b@6), a@5 (aborted), the marker, the tombstone c@4.
        assert_eq!(removed, 4);
        assert_eq!(offsets(&log.read(0)), [2, 6]);
        assert_eq!(
            log.read(0).end_offset,
            8,
            "offsets and the end are unchanged"
        );
        assert_eq!(log.append(b"d", None), 8);
    }
}
