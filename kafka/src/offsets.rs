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

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use kafka_coordination_core::record::Role;
use kafka_coordination_core::token::FencingToken;
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, FindCoordinatorRequest, GroupId, OffsetFetchRequest, ProducerId,
    TopicName, TransactionalId, TxnOffsetCommitRequest, TxnOffsetCommitResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::api::{txn_error, Attempt};
use super::classify::code;
use super::cluster::Cluster;
use super::net::Conn;
use kafka_coordination_transport::error::TransportError;
use kafka_coordination_transport::lock::lock;
use kafka_coordination_transport::GroupOffsets;

const MAX_ADD_OFFSETS: i16 = 3;
const MAX_TXN_OFFSET_COMMIT: i16 = 3;
/// OffsetFetch v7 is the first with `require_stable`, and the last with one group per request.
const OFFSET_FETCH: i16 = 7;
const KEY_TYPE_GROUP: i8 = 0;

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
    topics: BTreeMap<String, Vec<(i32, i64, Option<String>)>>,
}

impl OwnedGroupOffsets {
    pub(crate) fn from(o: GroupOffsets<'_>) -> Result<OwnedGroupOffsets, TransportError> {
        if o.group.is_empty() {
            return Err(TransportError::config("the consumer group id is empty"));
        }
        let mut topics: BTreeMap<String, Vec<(i32, i64, Option<String>)>> = BTreeMap::new();
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
                    find_group_coordinator_on(conn, &id, deadline)
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
                        txn_offset_commit_on(conn, &role, token, &offsets, &what, deadline)
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
                        offset_fetch_on(conn, &id, &partitions, &what, deadline)
                    })
                    .await
                }
            })
            .await
    }
}

/// One FindCoordinator for a group on `conn`: the coordinator's address.
fn find_group_coordinator_on(
    conn: &mut Conn,
    group: &str,
    deadline: Instant,
) -> Result<String, Attempt> {
    let Some(version) = conn.version::<FindCoordinatorRequest>() else {
        return Err(Attempt::Stop(TransportError::config(format!(
            "the broker at {} does not support FindCoordinator",
            conn.addr()
        ))));
    };
    let key = StrBytes::from_string(group.to_owned());
    let req = FindCoordinatorRequest::default().with_key_type(KEY_TYPE_GROUP);
    let req = if version >= 4 {
        req.with_coordinator_keys(vec![key])
    } else {
        req.with_key(key)
    };
    let resp = conn.call(&req, version, deadline)?;
    let (error, host, port) = if version >= 4 {
        match resp.coordinators.into_iter().next() {
            Some(c) => (c.error_code, c.host, c.port),
            None => {
                return Err(Attempt::relookup(format!(
                    "FindCoordinator did not answer for group '{group}'"
                )))
            }
        }
    } else {
        (resp.error_code, resp.host, resp.port)
    };
    match code::error(error) {
        None => Ok(format!("{host}:{port}")),
        Some(code::E::GroupAuthorizationFailed) => Err(Attempt::Stop(group_unauthorized(group))),
        Some(e) => {
            let other = e.code();
            Err(Attempt::from_code(
                other,
                format!(
                    "FindCoordinator for group '{group}': error {other} ({})",
                    code::name(other)
                ),
            ))
        }
    }
}

/// One AddOffsetsToTxn of `group` for `role` (pair `token`) on `conn`, a connection to the
/// role's transaction coordinator.
pub(crate) fn add_offsets_on(
    conn: &mut Conn,
    role: &Role,
    token: FencingToken,
    group: &str,
    deadline: Instant,
) -> Result<(), Attempt> {
    let Some(version) = conn.version_at_most::<AddOffsetsToTxnRequest>(MAX_ADD_OFFSETS) else {
        return Err(Attempt::Stop(TransportError::config(format!(
            "the broker at {} supports no AddOffsetsToTxn version up to v{MAX_ADD_OFFSETS}",
            conn.addr()
        ))));
    };
    let req = AddOffsetsToTxnRequest::default()
        .with_transactional_id(TransactionalId(StrBytes::from_string(
            role.as_str().to_owned(),
        )))
        .with_producer_id(ProducerId(token.producer_id))
        .with_producer_epoch(token.producer_epoch)
        .with_group_id(GroupId(StrBytes::from_string(group.to_owned())));
    let resp = conn.call(&req, version, deadline)?;
    match code::error(resp.error_code) {
        None => Ok(()),
        Some(code::E::GroupAuthorizationFailed) => Err(Attempt::Stop(group_unauthorized(group))),
        Some(e) => {
            let err = e.code();
            Err(txn_error(
                role,
                token,
                &format!("AddOffsetsToTxn (group '{group}')"),
                conn.addr(),
                err,
            ))
        }
    }
}

fn txn_offset_commit_on(
    conn: &mut Conn,
    role: &Role,
    token: FencingToken,
    offsets: &OwnedGroupOffsets,
    what: &str,
    deadline: Instant,
) -> Result<(), Attempt> {
    let Some(version) = conn.version_at_most::<TxnOffsetCommitRequest>(MAX_TXN_OFFSET_COMMIT)
    else {
        return Err(Attempt::Stop(TransportError::config(format!(
            "the broker at {} supports no TxnOffsetCommit version up to \
             v{MAX_TXN_OFFSET_COMMIT}",
            conn.addr()
        ))));
    };
    let topics = offsets
        .topics
        .iter()
        .map(|(topic, partitions)| {
            TxnOffsetCommitRequestTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic.clone())))
                .with_partitions(
                    partitions
                        .iter()
                        .map(|(p, offset, metadata)| {
                            TxnOffsetCommitRequestPartition::default()
                                .with_partition_index(*p)
                                .with_committed_offset(*offset)
                                .with_committed_leader_epoch(-1)
                                .with_committed_metadata(Some(StrBytes::from_string(
                                    metadata.clone().unwrap_or_default(),
                                )))
                        })
                        .collect(),
                )
        })
        .collect();
    let mut req = TxnOffsetCommitRequest::default()
        .with_transactional_id(TransactionalId(StrBytes::from_string(
            role.as_str().to_owned(),
        )))
        .with_group_id(GroupId(StrBytes::from_string(offsets.group.clone())))
        .with_producer_id(ProducerId(token.producer_id))
        .with_producer_epoch(token.producer_epoch)
        .with_topics(topics);
    if version >= 3 {
        // A producer outside the group: no generation, no member.
        req = req
            .with_generation_id(-1)
            .with_member_id(StrBytes::default())
            .with_group_instance_id(None);
    }
    let resp = conn.call(&req, version, deadline)?;
    txn_offset_commit_answer(&resp, role, token, &offsets.group, what, conn.addr())
}

/// What a TxnOffsetCommit answer `resp` (from the group coordinator at `addr`) means for
/// `role` (pair `token`): the first partition's error decides.
fn txn_offset_commit_answer(
    resp: &TxnOffsetCommitResponse,
    role: &Role,
    token: FencingToken,
    group: &str,
    what: &str,
    addr: &str,
) -> Result<(), Attempt> {
    let worst = resp
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| (t.name.0.as_str(), p.error_code))
        })
        .find(|(_, c)| *c != code::NONE);
    match worst {
        None => Ok(()),
        Some((_, c)) if code::error(c) == Some(code::E::GroupAuthorizationFailed) => {
            Err(Attempt::Stop(group_unauthorized(group)))
        }
        // The coordinator checks READ on each topic whose offsets are committed (and READ on
        // the group), as for a consumer's OffsetCommit: not WRITE, whatever the transaction.
        Some((topic, c)) if code::error(c) == Some(code::E::TopicAuthorizationFailed) => {
            Err(Attempt::Stop(
                TransportError::unauthorized(format!(
                    "{what}: the principal needs the READ ACL on Topic '{topic}' to commit its \
                     offsets (and READ on Group '{group}') (TOPIC_AUTHORIZATION_FAILED)"
                ))
                .with_kafka_code(c),
            ))
        }
        Some((_, err)) => Err(txn_error(
            role,
            token,
            &format!("TxnOffsetCommit of group '{group}'"),
            addr,
            err,
        )),
    }
}

fn offset_fetch_on(
    conn: &mut Conn,
    group: &str,
    partitions: &[(String, i32)],
    what: &str,
    deadline: Instant,
) -> Result<Vec<Option<i64>>, Attempt> {
    if conn
        .version::<OffsetFetchRequest>()
        .is_none_or(|v| v < OFFSET_FETCH)
    {
        return Err(Attempt::Stop(TransportError::config(format!(
            "the broker at {} does not support OffsetFetch v{OFFSET_FETCH} (require_stable, \
             Kafka 2.5 or newer)",
            conn.addr()
        ))));
    }
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (t, p) in partitions {
        by_topic.entry(t).or_default().push(*p);
    }
    let topics = by_topic
        .into_iter()
        .map(|(t, ps)| {
            OffsetFetchRequestTopic::default()
                .with_name(TopicName(StrBytes::from_string(t.to_owned())))
                .with_partition_indexes(ps)
        })
        .collect();
    let req = OffsetFetchRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_owned())))
        .with_topics(Some(topics))
        .with_require_stable(true);
    let resp = conn.call(&req, OFFSET_FETCH, deadline)?;
    let fail = |err: i16| {
        if code::error(err) == Some(code::E::GroupAuthorizationFailed) {
            return Attempt::Stop(group_unauthorized(group));
        }
        Attempt::from_code(err, format!("{what}: error {err} ({})", code::name(err)))
    };
    if resp.error_code != code::NONE {
        return Err(fail(resp.error_code));
    }
    let mut answers = Vec::with_capacity(partitions.len());
    for (t, p) in partitions {
        let found = resp
            .topics
            .iter()
            .filter(|x| x.name.0.as_str() == t)
            .flat_map(|x| x.partitions.iter())
            .find(|x| x.partition_index == *p);
        let Some(found) = found else {
            return Err(Attempt::again(format!("{what}: no answer for {t}/{p}")));
        };
        if found.error_code != code::NONE {
            return Err(fail(found.error_code));
        }
        answers.push((found.committed_offset >= 0).then_some(found.committed_offset));
    }
    Ok(answers)
}

fn group_unauthorized(group: &str) -> TransportError {
    TransportError::unauthorized(format!(
        "consumer group '{group}': the principal needs the READ ACL on Group '{group}' \
         (GROUP_AUTHORIZATION_FAILED)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::txn_offset_commit_response::{
        TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
    };

    /// A TxnOffsetCommit answer with `error` on the second topic's partition.
    fn answer(error: i16) -> TxnOffsetCommitResponse {
        let topic = |name: &str, error_code: i16| {
            TxnOffsetCommitResponseTopic::default()
                .with_name(TopicName(StrBytes::from_string(name.to_owned())))
                .with_partitions(vec![TxnOffsetCommitResponsePartition::default()
                    .with_partition_index(0)
                    .with_error_code(error_code)])
        };
        TxnOffsetCommitResponse::default()
            .with_topics(vec![topic("allowed", code::NONE), topic("orders", error)])
    }

    fn stopped(error: i16) -> TransportError {
        let role = Role::new("billing").expect("role");
        match txn_offset_commit_answer(
            &answer(error),
            &role,
            FencingToken::new(7, 0),
            "payments",
            "TxnOffsetCommit of group 'payments' for role 'billing'",
            "127.0.0.1:9092",
        ) {
            Err(Attempt::Stop(e)) => e,
            Ok(()) => panic!("code {error} was taken for success"),
            Err(_) => panic!("code {error} is tried again"),
        }
    }

    /// The group coordinator refuses a topic the principal may not READ: the error names that
    /// topic, the READ ACL it needs, and the group (which needs READ too).
    #[test]
    fn a_topic_refused_to_an_offset_commit_asks_for_read_on_that_topic() {
        let e = stopped(code::E::TopicAuthorizationFailed.code());
        assert_eq!(
            e.kind(),
            kafka_coordination_transport::error::ErrorKind::Unauthorized,
            "{e}"
        );
        let m = e.message();
        assert!(m.contains("READ ACL on Topic 'orders'"), "{m}");
        assert!(m.contains("READ on Group 'payments'"), "{m}");
        assert!(!m.contains("WRITE"), "{m}");
    }

    /// Offsets the coordinator refuses for good end the write at once with what to fix.
    #[test]
    fn offsets_refused_for_good_end_the_write_with_what_to_fix() {
        let e = stopped(code::E::OffsetMetadataTooLarge.code());
        assert_eq!(
            e.kind(),
            kafka_coordination_transport::error::ErrorKind::Config,
            "{e}"
        );
        assert!(e.message().contains("offset.metadata.max.bytes"), "{e}");
        let e = stopped(code::E::InvalidCommitOffsetSize.code());
        assert_eq!(
            e.kind(),
            kafka_coordination_transport::error::ErrorKind::Config,
            "{e}"
        );
        assert!(e.message().contains("max.message.bytes"), "{e}");
    }
}
