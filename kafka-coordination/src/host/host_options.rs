//! How a host runs ([`HostOptions`]) and what its loop reports ([`HostStats`]).

use std::sync::Arc;
use std::time::Duration;

use crate::clock::{Clock, SystemClock};

/// The default number of a host's transport calls in flight at once.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 8;
/// The default interval at which a host reads again a partition that has parked long polls.
pub const DEFAULT_REFRESH: Duration = Duration::from_millis(50);

/// How a [`Host`](super::Host) runs.
#[derive(Clone)]
pub struct HostOptions {
    pub(super) max_in_flight: usize,
    pub(super) refresh: Duration,
    pub(super) clock: Arc<dyn Clock>,
    pub(super) spread_renewals: bool,
    pub(super) tail_reads: bool,
}

impl std::fmt::Debug for HostOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostOptions")
            .field("max_in_flight", &self.max_in_flight)
            .field("refresh", &self.refresh)
            .field("manual_clock", &self.clock.as_manual().is_some())
            .field("spread_renewals", &self.spread_renewals)
            .field("tail_reads", &self.tail_reads)
            .finish()
    }
}

impl Default for HostOptions {
    fn default() -> Self {
        HostOptions {
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            refresh: DEFAULT_REFRESH,
            clock: Arc::new(SystemClock),
            spread_renewals: true,
            tail_reads: true,
        }
    }
}

impl HostOptions {
    /// The defaults: [`DEFAULT_MAX_IN_FLIGHT`] calls in flight, a [`DEFAULT_REFRESH`] refresh, the
    /// system clock.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many transport calls (reads, checks, registration batches, acquires, lease
    /// writes) may be in flight at once (default [`DEFAULT_MAX_IN_FLIGHT`]; `0` means the
    /// default). The host holds no thread for a call: it starts each on its loop and the
    /// transport answers from its own threads (see [`crate::transport`]). Calls waiting for
    /// room are taken earliest due first, and [`HostStats::queued`] counts them.
    pub fn max_in_flight(mut self, n: usize) -> Self {
        self.max_in_flight = n;
        self
    }

    /// How often a partition on which standbys wait for records (a long poll) is read again
    /// (default [`DEFAULT_REFRESH`]): what a resign may wait on top of the read itself before
    /// the next member sees it. On a manual clock the partition is read at every change of
    /// the clock instead.
    pub fn refresh(mut self, d: Duration) -> Self {
        self.refresh = d;
        self
    }

    /// The clock of every candidacy on the host (default: the system clock). A candidacy
    /// whose [`Options`](crate::Options) name another manual clock is refused.
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// Whether the host spreads the renewals of the roles it leads over the renew interval
    /// (default `true`). Each hosted candidacy's first renewal of a term comes a fraction of
    /// the renew interval early, the fraction taken from a hash of the role's name, and the
    /// renewals after it every renew interval (see
    /// [`Candidate::spread_renewals`](kafka_coordination_core::machine::Candidate::spread_renewals)
    /// and [`renewal_phase`](kafka_coordination_core::machine::renewal_phase); a custom event
    /// loop that runs many candidates gets the same spread from the same call).
    ///
    /// Without it, roles won together (say, at the start of the process) renew together for
    /// as long as they are held: the broker gets their renewals in bursts, and if the process
    /// dies their leases run out at the same moment, so that every standby challenges at once.
    /// Turn it off to have hosted candidacies renew exactly as candidacies started alone do
    /// (a renew interval after the claim).
    pub fn spread_renewals(mut self, on: bool) -> Self {
        self.spread_renewals = on;
        self
    }

    /// Whether standbys' long polls are served from the transport's tail of their partition
    /// when it has one (default: on). A transport that tails ([`StateReader::on_tailed`], such
    /// as the Kafka transport with its long-polling Fetch per broker) then costs the host no
    /// request and no place among the calls in flight: a read that only long polls wait on reads the
    /// transport's copy on the loop, and the tail wakes the loop as soon as a partition moves,
    /// so a standby hears of a resign without waiting for the next refresh. Reads that must see
    /// what was committed before they began (a candidacy's first read, a standby's read at its
    /// turn) always go to [`start_read_partition`](crate::transport::StateReader::start_read_partition). Off: every
    /// read goes there, each refresh included (for comparisons).
    ///
    /// [`StateReader::on_tailed`]: crate::transport::StateReader::on_tailed
    pub fn tail_reads(mut self, on: bool) -> Self {
        self.tail_reads = on;
        self
    }
}

/// What a host's loop is doing, as of a recent turn ([`Host::stats`](super::Host::stats)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct HostStats {
    /// Candidacies the loop runs.
    pub candidacies: usize,
    /// Of them, waiting for a timer.
    pub waiting: usize,
    /// Of them, in a transport call (in flight, or queued for a place).
    pub calling: usize,
    /// Of them, waiting for a read of their partition (issued or to be issued).
    pub reading: usize,
    /// Of them, in a parked long poll.
    pub parked: usize,
    /// Partitions being read now.
    pub partitions_reading: usize,
    /// Transport calls and reads queued for a place among the calls in flight (not yet
    /// started). A queue that stays long means the host asks for more than the cluster
    /// answers; takeovers and reads pass renewals in it (see
    /// [`HostOptions::max_in_flight`]).
    pub queued: usize,
    /// Turns of the loop so far.
    pub turns: u64,
    /// Partition reads sent to the transport so far ([`start_read_partition`]).
    ///
    /// [`start_read_partition`]: crate::transport::StateReader::start_read_partition
    pub reads: u64,
    /// Partition reads served so far from the transport's tail of the partition
    /// ([`read_tailed`](crate::transport::StateReader::read_tailed)) on the loop itself, with no request
    /// at all: reads that only long polls wait on, when the transport tails.
    pub tailed_reads: u64,
}
