//! Shared reads: one view per partition of `__coordination_state`, read once for every hosted
//! candidacy of a role on it, and served to each candidacy as the records of its own role.
//!
//! A candidacy's `ReadPartition { from_offset }` is answered only by a read that was issued
//! after the request (so the answer is as fresh as a read of its own would be), and with
//! exactly the records of its role at offsets `>= from_offset` up to that read's end. Records of
//! other roles are left out: the machine ignores them anyway, and serving them to every
//! candidacy of a partition costs N x N.
//!
//! A read that may wait (`wait_until`) is *parked* after its first fresh read found nothing for
//! its role: the view is read again every `refresh` (on a manual clock: at every change of the
//! clock) and the read is answered as soon as records of its role appear, at `wait_until`, or on
//! a cancel. That is the long poll of the one-candidacy drivers, shared by a whole partition.
//! A read that only long polls wait on ([`Fetch::may_lag`]) may be served from the transport's
//! tail of the partition instead of a request (the host decides).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kafka_coordination_core::machine::Event;
use kafka_coordination_core::record::KeyRef;
use kafka_coordination_core::state::Record;
use kafka_coordination_core::time::UnixMillis;

use crate::error::TransportError;
use crate::transport::ReadBatch;

/// The most records a role's buffer holds while none of its candidacies asks for a read.
const IDLE_RECORDS: usize = 16;

/// One candidacy's outstanding read.
#[derive(Clone, Debug)]
pub(crate) struct Req {
    pub(crate) slot: usize,
    pub(crate) gen: u64,
    pub(crate) role: Arc<str>,
    pub(crate) from: i64,
    /// Until when it may wait for records (a long poll), if at all.
    pub(crate) until: Option<UnixMillis>,
}

/// The records of one role, complete for offsets `from..through`.
#[derive(Debug)]
struct Buf {
    from: i64,
    through: i64,
    records: Vec<Record>,
    /// Hosted candidacies of this role that use this view.
    users: usize,
}

impl View {
    fn parked_changed(&mut self) {
        self.earliest = self.parked.iter().filter_map(|r| r.until).min();
    }
}

#[derive(Debug, Default)]
struct View {
    /// How far the view has read.
    end: Option<i64>,
    stalled: bool,
    /// The high watermark of the last read, when the transport tells it.
    high_watermark: Option<i64>,
    bufs: HashMap<Arc<str>, Buf>,
    /// Requests waiting for the next read.
    queued: Vec<Req>,
    /// Requests the read under way answers, and the offset it started at.
    reading: Option<(i64, Vec<Req>)>,
    /// Long polls waiting for records of their role.
    parked: Vec<Req>,
    /// The earliest end of a parked wait (kept with `parked`).
    earliest: Option<UnixMillis>,
    /// When a view with parked requests is read again (real clock).
    refresh_at: Option<UnixMillis>,
    /// The manual clock's change count at the last read (manual clock).
    read_at_change: u64,
}

/// A read to issue: partition and start offset.
pub(crate) struct Fetch {
    pub(crate) partition: i32,
    pub(crate) from: i64,
    /// Only long polls wait on it (parked ones, or new ones still inside their wait): none
    /// needs a read that covers everything readable when it was asked, so the transport's
    /// tail may serve it, as a transport serves a long poll of its own. A long poll whose wait
    /// ends before records come is read again as any other request.
    pub(crate) may_lag: bool,
}

/// An answer for a candidacy: its slot, the generation of its request, and the outcome.
pub(crate) type Answer = (usize, u64, Result<Event, TransportError>);

#[derive(Debug, Default)]
pub(crate) struct Views {
    parts: HashMap<i32, View>,
    refresh: Duration,
}

impl Views {
    pub(crate) fn new(refresh: Duration) -> Views {
        Views {
            parts: HashMap::new(),
            refresh,
        }
    }

    /// A hosted candidacy of `role` started using `partition`.
    pub(crate) fn add_user(&mut self, partition: i32, role: &Arc<str>) {
        let view = self.parts.entry(partition).or_default();
        let buf = view.bufs.entry(role.clone()).or_insert_with(|| Buf {
            // Nothing is known yet: the first request sets where it must start.
            from: i64::MAX,
            through: i64::MAX,
            records: Vec::new(),
            users: 0,
        });
        buf.users += 1;
    }

    /// A hosted candidacy of `role` ended.
    pub(crate) fn remove_user(&mut self, partition: i32, role: &Arc<str>, slot: usize) {
        let Some(view) = self.parts.get_mut(&partition) else {
            return;
        };
        view.queued.retain(|r| r.slot != slot);
        view.parked.retain(|r| r.slot != slot);
        view.parked_changed();
        if let Some((_, reqs)) = &mut view.reading {
            reqs.retain(|r| r.slot != slot);
        }
        if let Some(buf) = view.bufs.get_mut(role) {
            buf.users = buf.users.saturating_sub(1);
            if buf.users == 0 {
                view.bufs.remove(role);
            }
        }
        if view.bufs.is_empty() && view.reading.is_none() {
            self.parts.remove(&partition);
        }
    }

    /// A candidacy asks for the records of its role from `req.from`.
    pub(crate) fn request(&mut self, partition: i32, req: Req) {
        let view = self.parts.entry(partition).or_default();
        let buf = view.bufs.entry(req.role.clone()).or_insert_with(|| Buf {
            from: i64::MAX,
            through: i64::MAX,
            records: Vec::new(),
            users: 1,
        });
        if buf.from > req.from {
            // Records before what the view holds for the role: read them again from there.
            buf.from = req.from;
            buf.through = req.from;
            buf.records.clear();
        }
        view.queued.push(req);
    }

    /// Whether any read is issued or waiting to be.
    /// (requests waiting for a read, partitions being read, parked long polls)
    pub(crate) fn counts(&self) -> (usize, usize, usize) {
        self.parts.values().fold((0, 0, 0), |(q, r, p), v| {
            (
                q + v.queued.len() + v.reading.as_ref().map_or(0, |(_, reqs)| reqs.len()),
                r + usize::from(v.reading.is_some()),
                p + v.parked.len(),
            )
        })
    }

    pub(crate) fn busy(&self) -> bool {
        self.parts
            .values()
            .any(|v| !v.queued.is_empty() || v.reading.is_some())
    }

    /// Moves the parked requests of `slot` (a cancel) or every parked request whose wait is over
    /// to the next read.
    pub(crate) fn unpark(
        &mut self,
        now: UnixMillis,
        any_cancel: bool,
        cancelled: &dyn Fn(usize) -> bool,
    ) {
        for view in self.parts.values_mut() {
            // Without a cancel, only a view whose earliest wait is over has work here.
            if !any_cancel && view.earliest.is_none_or(|e| now < e) {
                continue;
            }
            let before = view.parked.len();
            let mut i = 0;
            while i < view.parked.len() {
                let r = &view.parked[i];
                if r.until.is_none_or(|u| now >= u) || cancelled(r.slot) {
                    let r = view.parked.swap_remove(i);
                    view.queued.push(r);
                } else {
                    i += 1;
                }
            }
            if view.parked.len() != before {
                view.parked_changed();
            }
        }
    }

    /// The reads to issue now: every partition with requests waiting and no read under way, and
    /// every partition with parked requests whose refresh is due. `changes` is the manual
    /// clock's change count (`None` on a real clock).
    pub(crate) fn fetches(&mut self, now: UnixMillis, changes: Option<u64>) -> Vec<Fetch> {
        let mut out = Vec::new();
        for (&partition, view) in &mut self.parts {
            if view.reading.is_some() {
                continue;
            }
            let refresh = !view.parked.is_empty()
                && match changes {
                    Some(c) => c > view.read_at_change,
                    None => view.refresh_at.is_none_or(|at| now >= at),
                };
            if view.queued.is_empty() && !refresh {
                continue;
            }
            let mut from = view.end.unwrap_or(i64::MAX);
            for buf in view.bufs.values() {
                from = from.min(buf.through);
            }
            for r in &view.queued {
                from = from.min(r.from);
            }
            if from == i64::MAX {
                from = 0;
            }
            let may_lag = view.queued.iter().all(|r| r.until.is_some_and(|u| now < u));
            view.reading = Some((from, std::mem::take(&mut view.queued)));
            if let Some(c) = changes {
                view.read_at_change = c;
            }
            view.refresh_at = Some(now + self.refresh);
            out.push(Fetch {
                partition,
                from,
                may_lag,
            });
        }
        out
    }

    /// The transport's tail of `partition` moved: a view with parked requests is read again
    /// at the next [`fetches`](Views::fetches) (at once, not at its refresh).
    pub(crate) fn refresh_now(&mut self, partition: i32) {
        if let Some(view) = self.parts.get_mut(&partition) {
            if !view.parked.is_empty() {
                view.refresh_at = None;
                view.read_at_change = 0;
            }
        }
    }

    /// The earliest instant a parked request must be looked at again (its wait ends, or its
    /// view is read again).
    pub(crate) fn next_wake(&self) -> Option<UnixMillis> {
        self.parts
            .values()
            .filter(|v| !v.parked.is_empty())
            .flat_map(|v| {
                v.earliest
                    .into_iter()
                    .chain(v.refresh_at.filter(|_| v.reading.is_none()))
            })
            .min()
    }

    /// A read of `partition` finished: files its records by role and answers the requests it
    /// can. `now` decides whether a long poll with nothing yet waits on.
    pub(crate) fn read_done(
        &mut self,
        partition: i32,
        outcome: Result<ReadBatch, TransportError>,
        now: UnixMillis,
        cancelled: &dyn Fn(usize) -> bool,
    ) -> Vec<Answer> {
        let mut answers = Vec::new();
        let Some(view) = self.parts.get_mut(&partition) else {
            return answers;
        };
        let Some((start, reqs)) = view.reading.take() else {
            return answers;
        };
        let batch = match outcome {
            Ok(batch) => batch,
            Err(e) => {
                // Everyone waiting on this partition learns of the failure, as a read of its
                // own would have told it.
                for r in reqs.into_iter().chain(view.parked.drain(..)) {
                    answers.push((r.slot, r.gen, Err(e.clone())));
                }
                view.parked_changed();
                return answers;
            }
        };
        let end = batch.end_offset;
        // The buffers this read continues (it started where they stopped, or before).
        let extends = |buf: &Buf| buf.through != i64::MAX && start <= buf.through;
        for record in batch.records {
            let Ok(key) = KeyRef::decode(&record.key) else {
                continue;
            };
            let role = key.role();
            let Some(buf) = view.bufs.get_mut(role) else {
                continue;
            };
            if extends(buf) && record.offset >= buf.through {
                // A role whose candidacies ask for nothing for long (a leader renews, it does
                // not read) would keep every record of the partition's reads for as long as
                // the host runs: at the bound its buffer is emptied and marked unknown (it
                // takes no more records), and a later request reads again from where it asks.
                // A standby between two reads keeps far fewer.
                if buf.records.len() >= IDLE_RECORDS
                    && !reqs
                        .iter()
                        .chain(&view.queued)
                        .chain(&view.parked)
                        .any(|r| *r.role == *role)
                {
                    buf.from = i64::MAX;
                    buf.through = i64::MAX;
                    buf.records = Vec::new();
                    continue;
                }
                buf.records.push(record);
            }
        }
        for buf in view.bufs.values_mut() {
            if extends(buf) {
                buf.through = buf.through.max(end);
            }
        }
        view.end = Some(view.end.map_or(end, |e| e.max(end)));
        view.stalled = batch.stalled;
        view.high_watermark = batch.high_watermark;
        for r in reqs {
            let covered = view
                .bufs
                .get(&r.role)
                .is_some_and(|b| b.from <= r.from && b.through >= end && b.through != i64::MAX);
            if !covered {
                view.queued.push(r);
                continue;
            }
            let has = view
                .bufs
                .get(&r.role)
                .is_some_and(|b| b.records.iter().any(|rec| rec.offset >= r.from));
            let waits = r.until.is_some_and(|u| now < u) && !has && !cancelled(r.slot);
            if waits {
                view.parked.push(r);
            } else {
                answers.push(serve(view, r, end));
            }
        }
        let mut i = 0;
        while i < view.parked.len() {
            let r = &view.parked[i];
            let ready = view.bufs.get(&r.role).is_some_and(|b| {
                b.through >= end && b.records.iter().any(|rec| rec.offset >= r.from)
            });
            if ready {
                let r = view.parked.swap_remove(i);
                answers.push(serve(view, r, end));
            } else {
                i += 1;
            }
        }
        view.parked_changed();
        answers
    }
}

/// The answer to `r` from its role's buffer, which then keeps only what comes after `end`.
fn serve(view: &mut View, r: Req, end: i64) -> Answer {
    let mut records = Vec::new();
    if let Some(buf) = view.bufs.get_mut(&r.role) {
        records = buf
            .records
            .iter()
            .filter(|rec| rec.offset >= r.from)
            .cloned()
            .collect();
        buf.records.retain(|rec| rec.offset >= end);
        buf.from = buf.from.max(end.min(buf.through));
    }
    (
        r.slot,
        r.gen,
        Ok(Event::RecordsRead {
            records,
            end_offset: end,
            stalled: view.stalled,
            high_watermark: view.high_watermark,
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_coordination_core::record::{Key, Role};

    fn lease_record(offset: i64, role: &str) -> Record {
        let role = Role::new(role).expect("a role name");
        Record::new(offset, Key::lease(role).encode(), vec![1; 40])
    }

    fn req(slot: usize, role: &Arc<str>, from: i64, until: Option<i64>) -> Req {
        Req {
            slot,
            gen: 0,
            role: role.clone(),
            from,
            until: until.map(UnixMillis),
        }
    }

    /// A parked long poll's partition is read again at its refresh; news of the transport's
    /// tail (`refresh_now`) has it read at once. Only long polls wait on that read, so it may
    /// come from the tail; a request that needs a fresh read makes the read fresh.
    #[test]
    fn news_of_the_tail_reads_a_parked_partition_before_its_refresh() {
        let mut views = Views::new(Duration::from_millis(50));
        let role: Arc<str> = Arc::from("standby");
        views.add_user(3, &role);
        views.request(3, req(0, &role, 0, Some(10_000)));
        let t = UnixMillis(1_000);
        let first = views.fetches(t, None);
        assert!(first[0].may_lag, "a long poll inside its wait may lag");
        let empty = ReadBatch {
            records: Vec::new(),
            end_offset: 0,
            stalled: false,
            high_watermark: None,
        };
        assert!(views
            .read_done(3, Ok(empty.clone()), t, &|_| false)
            .is_empty());
        assert_eq!(views.counts().2, 1, "parked");
        // Before the refresh: nothing to read, unless the tail moved.
        let soon = UnixMillis(1_010);
        assert!(views.fetches(soon, None).is_empty());
        views.refresh_now(3);
        let news = views.fetches(soon, None);
        assert_eq!(news.len(), 1);
        assert!(news[0].may_lag);
        assert!(views.read_done(3, Ok(empty), soon, &|_| false).is_empty());
        // A request without a wait (a standby's read at its turn) is never served by a tail.
        views.request(3, req(1, &role, 0, None));
        assert!(!views.fetches(soon, None)[0].may_lag);
    }

    /// A role whose candidacy asks for nothing (a leader renews, it does not read) keeps at
    /// most [`IDLE_RECORDS`] records of the partition's reads: a host that leads some roles and
    /// stands by for others on the same partitions would otherwise keep every renewal of its
    /// own roles for as long as it runs. When it asks again, it is read again from where it
    /// asks.
    #[test]
    fn a_role_that_asks_for_nothing_keeps_a_bounded_buffer() {
        let mut views = Views::new(Duration::from_millis(50));
        let (leader, standby): (Arc<str>, Arc<str>) = (Arc::from("leader"), Arc::from("standby"));
        views.add_user(0, &leader);
        views.add_user(0, &standby);
        // Both read once (the leader before it won).
        views.request(0, req(0, &leader, 0, None));
        views.request(0, req(1, &standby, 0, Some(1_000_000)));
        let mut offset = 0;
        let mut now = UnixMillis(0);
        for round in 0..200 {
            let fetches = views.fetches(now, None);
            assert_eq!(fetches.len(), 1, "round {round}");
            let batch = ReadBatch {
                records: vec![lease_record(offset, "leader")],
                end_offset: offset + 1,
                stalled: false,
                high_watermark: None,
            };
            offset += 1;
            let answers = views.read_done(0, Ok(batch), now, &|_| false);
            // The leader's first read is answered; it asks for nothing after that.
            assert_eq!(answers.len(), usize::from(round == 0), "round {round}");
            now = UnixMillis(now.0 + 100);
        }
        let view = &views.parts[&0];
        assert!(
            view.bufs[&leader].records.len() <= IDLE_RECORDS,
            "{} records kept for a role that asks for nothing",
            view.bufs[&leader].records.len()
        );
        // It asks again from its last answer: a read from there serves it every record since.
        views.request(0, req(0, &leader, 1, None));
        let fetches = views.fetches(now, None);
        assert_eq!(fetches[0].from, 1);
        let all: Vec<Record> = (1..offset).map(|o| lease_record(o, "leader")).collect();
        let batch = ReadBatch {
            records: all,
            end_offset: offset,
            stalled: false,
            high_watermark: None,
        };
        let answers = views.read_done(0, Ok(batch), now, &|_| false);
        let served = answers
            .into_iter()
            .find(|(slot, _, _)| *slot == 0)
            .expect("the leader is answered");
        let Ok(Event::RecordsRead { records, .. }) = served.2 else {
            panic!("{:?}", served.2);
        };
        assert_eq!(records.len() as i64, offset - 1);
    }
}
