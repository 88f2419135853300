//! Fault injection and call accounting for the [`MemoryBroker`](super::MemoryBroker).

use std::fmt;
use std::time::Duration;

use crate::error::ErrorKind;

/// One kind of broker call, for fault injection, call counts and the call hook.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BrokerOp {
    /// [`Coordinator::start_acquire_epoch`](crate::transport::Coordinator::start_acquire_epoch).
    Acquire,
    /// [`Coordinator::start_describe_epochs`](crate::transport::Coordinator::start_describe_epochs),
    /// each role.
    Describe,
    /// [`StateReader::start_read_partition`](crate::transport::StateReader::start_read_partition).
    Read,
    /// Each append of [`Registrar::append_all`](crate::transport::Registrar::append_all).
    Append,
    /// [`LeaseWriter::start_write_lease`](crate::transport::LeaseWriter::start_write_lease), and the
    /// open-transaction calls of [`MemoryTransport`](super::MemoryTransport)
    /// (`begin_lease_write`, `commit_lease_write`, `begin_lease_write_and_crash`).
    WriteLease,
}

impl BrokerOp {
    /// Every operation, in declaration order.
    pub const ALL: [BrokerOp; 5] = [
        BrokerOp::Acquire,
        BrokerOp::Describe,
        BrokerOp::Read,
        BrokerOp::Append,
        BrokerOp::WriteLease,
    ];

    /// The trait method's name (`"acquire_epoch"`, `"read_partition"`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            BrokerOp::Acquire => "acquire_epoch",
            BrokerOp::Describe => "describe_epoch",
            BrokerOp::Read => "read_partition",
            BrokerOp::Append => "append",
            BrokerOp::WriteLease => "write_lease",
        }
    }
}

impl fmt::Display for BrokerOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How many calls of each kind the broker received, failed ones included.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CallCounts {
    /// Calls of `acquire_epoch`.
    pub acquire: u64,
    /// Calls of `describe_epoch`.
    pub describe: u64,
    /// Calls of `read_partition`.
    pub read: u64,
    /// Calls of `append`.
    pub append: u64,
    /// Calls of `write_lease` and of the open-transaction calls.
    pub write_lease: u64,
}

impl CallCounts {
    /// The count of one operation.
    pub fn get(&self, op: BrokerOp) -> u64 {
        match op {
            BrokerOp::Acquire => self.acquire,
            BrokerOp::Describe => self.describe,
            BrokerOp::Read => self.read,
            BrokerOp::Append => self.append,
            BrokerOp::WriteLease => self.write_lease,
        }
    }

    /// All calls together.
    pub fn total(&self) -> u64 {
        BrokerOp::ALL.iter().map(|op| self.get(*op)).sum()
    }

    pub(super) fn record(&mut self, op: BrokerOp) {
        let slot = match op {
            BrokerOp::Acquire => &mut self.acquire,
            BrokerOp::Describe => &mut self.describe,
            BrokerOp::Read => &mut self.read,
            BrokerOp::Append => &mut self.append,
            BrokerOp::WriteLease => &mut self.write_lease,
        };
        *slot = slot.saturating_add(1);
    }
}

/// A rule that applies to the next `remaining` calls of `op` (or of any operation).
#[derive(Clone, Debug)]
struct Rule<T> {
    op: Option<BrokerOp>,
    remaining: usize,
    what: T,
}

/// Consumes one use of the first rule that matches `op`.
fn take<T: Copy>(rules: &mut Vec<Rule<T>>, op: BrokerOp) -> Option<T> {
    let i = rules.iter().position(|r| r.op.is_none_or(|o| o == op))?;
    let rule = &mut rules[i];
    let what = rule.what;
    rule.remaining -= 1;
    if rule.remaining == 0 {
        rules.remove(i);
    }
    Some(what)
}

fn add<T>(rules: &mut Vec<Rule<T>>, op: Option<BrokerOp>, n: usize, what: T) {
    if n > 0 {
        rules.push(Rule {
            op,
            remaining: n,
            what,
        });
    }
}

/// The injected faults still to happen. Rules of one list apply in the order they were added.
#[derive(Clone, Debug, Default)]
pub(super) struct Faults {
    failures: Vec<Rule<ErrorKind>>,
    delays: Vec<Rule<Duration>>,
    lost_replies: Vec<Rule<()>>,
}

impl Faults {
    pub(super) fn add_failures(&mut self, op: Option<BrokerOp>, n: usize, kind: ErrorKind) {
        add(&mut self.failures, op, n, kind);
    }

    pub(super) fn add_delays(&mut self, op: Option<BrokerOp>, n: usize, delay: Duration) {
        add(&mut self.delays, op, n, delay);
    }

    pub(super) fn add_lost_replies(&mut self, op: Option<BrokerOp>, n: usize) {
        add(&mut self.lost_replies, op, n, ());
    }

    /// A failure to return instead of running the call.
    pub(super) fn take_failure(&mut self, op: BrokerOp) -> Option<ErrorKind> {
        take(&mut self.failures, op)
    }

    /// A delay to sleep before running the call.
    pub(super) fn take_delay(&mut self, op: BrokerOp) -> Option<Duration> {
        take(&mut self.delays, op)
    }

    /// Whether the reply of a call that took effect is lost.
    pub(super) fn take_lost_reply(&mut self, op: BrokerOp) -> bool {
        take(&mut self.lost_replies, op).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_apply_in_order_and_expire() {
        let mut f = Faults::default();
        f.add_failures(Some(BrokerOp::Read), 1, ErrorKind::Fatal);
        f.add_failures(None, 2, ErrorKind::Retriable);
        f.add_failures(None, 0, ErrorKind::Config);
        assert_eq!(f.take_failure(BrokerOp::Append), Some(ErrorKind::Retriable));
        assert_eq!(f.take_failure(BrokerOp::Read), Some(ErrorKind::Fatal));
        assert_eq!(f.take_failure(BrokerOp::Read), Some(ErrorKind::Retriable));
        assert_eq!(f.take_failure(BrokerOp::Read), None);
        assert!(!f.take_lost_reply(BrokerOp::Read));
    }

    #[test]
    fn counts_add_up() {
        let mut c = CallCounts::default();
        c.record(BrokerOp::Read);
        c.record(BrokerOp::Read);
        c.record(BrokerOp::WriteLease);
        assert_eq!(c.get(BrokerOp::Read), 2);
        assert_eq!(c.total(), 3);
        assert_eq!(BrokerOp::WriteLease.to_string(), "write_lease");
    }
}
