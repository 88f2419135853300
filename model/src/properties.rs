//! The names of the properties, as the checker reports them (the crate docs state each).

/// Property names, as the checker reports them.
pub const FENCE: &str = "fence: no write of a superseded pair is accepted";
/// See the crate docs, property 2.
pub const ONE_LEADER: &str = "at most one member leads with the current pair";
/// See the crate docs, property 3.
pub const LEASE_ORDER: &str = "no lease record of a superseded pair follows a newer one";
/// See the crate docs, property 4.
pub const NO_FAILBACK: &str = "no failback: a restarted member ranks behind earlier members";
/// See the crate docs, property 5.
pub const LIVENESS: &str = "a member leads within the failover bound";
/// See the crate docs, property 6.
pub const HANDOVER: &str = "a resign hands over without waiting for the lease";
/// See the crate docs, property 7.
pub const ONE_ELECTION: &str = "exactly one election: one pair minted per failover";
/// See the crate docs, property 8.
pub const STEP_DOWN: &str = "a deposed leader steps down within a renew interval";
/// See the crate docs, property 9.
pub const NO_MACHINE_ERROR: &str = "the machine accepts every answer";

/// Every property's name, in the order of the crate docs.
pub const PROPERTIES: [&str; 9] = [
    FENCE,
    ONE_LEADER,
    LEASE_ORDER,
    NO_FAILBACK,
    LIVENESS,
    HANDOVER,
    ONE_ELECTION,
    STEP_DOWN,
    NO_MACHINE_ERROR,
];
