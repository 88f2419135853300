//! Consumer group offsets in a role's transaction, and reading them back.
//!
//! * **In a transaction**: AddOffsetsToTxn (the group, to the role's transaction coordinator),
//!   then TxnOffsetCommit (to the group's coordinator, found with FindCoordinator key type 0)
//!   before EndTxn. The committer is a producer outside the group (generation -1, no member
//!   id), as Java's `sendOffsetsToTransaction(offsets, groupId)`. Versions stay below
//!   transaction version 2: AddOffsetsToTxn <= v3, TxnOffsetCommit <= v3.
//! * **Reading back**: OffsetFetch v7 with `require_stable`: the group coordinator answers
//!   UNSTABLE_OFFSET_COMMIT while a transaction with offsets of the partition is pending
//!   (retried), so the answer is the position of the last committed transaction.
//!
//! Each request is built and its answer read in its file in [`api`](super::api); here the
//! group coordinators are found, remembered and asked.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use kafka_coordination_core::record::Role;
use kafka_coordination_core::token::FencingToken;

use super::api::find_coordinator::FindCoordinator;
use super::api::offset_fetch::OffsetFetch;
use super::api::txn_offset_commit::{Offsets, TxnOffsetCommit};
use super::api::Attempt;
use super::cluster::Cluster;
use super::net::Conn;
use kafka_coordination_transport::error::TransportError;
use kafka_coordination_transport::lock::lock;
use kafka_coordination_transport::GroupOffsets;

/// The group coordinators this client found, by group id.
pub(crate) struct Groups {
    cluster: Arc<Cluster>,
    coordinators: Mutex<HashMap<String, String>>,
}

/// A group's offsets, owned, for requests sent (and sent again) from connection threads.
#[derive(Clone)]
pub(crate) struct OwnedGroupOffsets {
    pub(crate) group: String,
    /// topic -> (partition, next offset, metadata)
    topics: Offsets,
}

impl OwnedGroupOffsets {
    pub(crate) fn from(o: GroupOffsets<'_>) -> Result<OwnedGroupOffsets, TransportError> {
        if o.group.is_empty() {
            return Err(TransportError::config("the consumer group id is empty"));
        }
        let mut topics = Offsets::new();
        for c in o.offsets {
            if c.partition < 0 || c.next_offset < 0 {
                return Err(TransportError::config(format!(
                    "offset {} of {}/{} for group '{}': partitions and offsets are not negative",
                    c.next_offset, c.topic, c.partition, o.group
                )));
            }
            topics.entry(c.topic.to_owned()).or_default().push((
                c.partition,
                c.next_offset,
                c.metadata.map(str::to_owned),
            ));
        }
        Ok(OwnedGroupOffsets {
            group: o.group.to_owned(),
            topics,
        })
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.topics.is_empty()
    }
}

impl Groups {
    pub(crate) fn new(cluster: Arc<Cluster>) -> Groups {
        Groups {
            cluster,
            coordinators: Mutex::new(HashMap::new()),
        }
    }

    /// Runs `f` on a connection to the coordinator of `group` (looked up when not known); an
    /// answer that says it moved forgets it.
    async fn at_coordinator<T: Send + 'static>(
        &self,
        group: &str,
        deadline: Instant,
        f: impl FnOnce(&mut Conn) -> Result<T, Attempt> + Send + 'static,
    ) -> Result<T, Attempt> {
        let known = lock(&self.coordinators).get(group).cloned();
        let addr = match known {
            Some(addr) => addr,
            None => {
                let addr = self.find(group, deadline).await?;
                lock(&self.coordinators).insert(group.to_owned(), addr.clone());
                addr
            }
        };
        let result = self.cluster.on_async(&addr, deadline, f).await;
        if let Err(Attempt::Again { relookup: true, .. } | Attempt::Silent(_)) = &result {
            lock(&self.coordinators).remove(group);
        }
        result
    }

    /// FindCoordinator (key type 0) for `group`, asked of each bootstrap server in turn.
    async fn find(&self, group: &str, deadline: Instant) -> Result<String, Attempt> {
        let mut last = Attempt::again("no bootstrap server configured");
        for server in self.cluster.bootstrap().split(',') {
            let id = group.to_owned();
            match self
                .cluster
                .on_async(server, deadline, move |conn| {
                    conn.exchange(&FindCoordinator::Group { group: &id }, deadline)
                        .and_then(|found| found.ours)
                })
                .await
            {
                Ok(addr) => return Ok(addr),
                Err(stop @ Attempt::Stop(_)) => return Err(stop),
                Err(other) => last = other,
            }
        }
        Err(last)
    }

    /// TxnOffsetCommit of `offsets` in the open transaction of `role` (pair `token`).
    pub(crate) async fn txn_offset_commit(
        &self,
        role: &Role,
        token: FencingToken,
        offsets: &OwnedGroupOffsets,
        deadline: Instant,
    ) -> Result<(), TransportError> {
        let what = format!(
            "TxnOffsetCommit of group '{}' for role '{role}'",
            offsets.group
        );
        self.cluster
            .retry_async(&what, deadline, || {
                let (role, offsets, what) = (role.clone(), offsets.clone(), what.clone());
                async move {
                    let group = offsets.group.clone();
                    self.at_coordinator(&group, deadline, move |conn| {
                        let x = TxnOffsetCommit {
                            role: &role,
                            token,
                            group: &offsets.group,
                            offsets: &offsets.topics,
                            what: &what,
                        };
                        conn.exchange(&x, deadline)
                    })
                    .await
                }
            })
            .await
    }

    /// The committed offsets of `group` for `partitions` (OffsetFetch, `require_stable`), in
    /// order; `None` where the group has none.
    pub(crate) async fn committed(
        &self,
        group: &str,
        partitions: &[(String, i32)],
        deadline: Instant,
    ) -> Result<Vec<Option<i64>>, TransportError> {
        let what = format!("OffsetFetch of group '{group}'");
        self.cluster
            .retry_async(&what, deadline, || {
                let (id, partitions, what) = (group.to_owned(), partitions.to_vec(), what.clone());
                async move {
                    self.at_coordinator(&id.clone(), deadline, move |conn| {
                        let x = OffsetFetch {
                            group: &id,
                            partitions: &partitions,
                            what: &what,
                        };
                        conn.exchange(&x, deadline)
                    })
                    .await
                }
            })
            .await
    }
}
