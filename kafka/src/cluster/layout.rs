//! What the brokers' metadata says of a topic: its layout, and whether a failure with one
//! of its partitions is a configuration error.

use std::time::Duration;

/// How long [`Cluster::confirm`] waits between its two metadata answers: a broker that had
/// not caught up with a new topic has by then.
pub(crate) const CONFIRM_PAUSE: Duration = Duration::from_millis(500);

/// A topic's entry in a Metadata answer, and the cluster's brokers.
pub(super) struct TopicMetadata {
    /// The server that answered.
    pub(super) server: String,
    pub(super) error_code: i16,
    /// (node id, address) of every broker, by node id.
    pub(super) brokers: Vec<(i32, String)>,
    /// The address of the broker the answer names as controller.
    pub(super) controller: Option<String>,
    /// The replica count of each partition.
    pub(super) replicas: Vec<usize>,
    /// (partition, its leader's address when the partition has one).
    pub(super) partitions: Vec<(i32, Option<String>)>,
}

/// The cluster's brokers and a topic's layout ([`Cluster::layout`]).
pub(crate) struct Layout {
    /// (node id, address) of every broker, by node id.
    pub(crate) brokers: Vec<(i32, String)>,
    /// The broker to send controller requests (CreateTopics) to: the controller, or on a KRaft
    /// cluster a broker that forwards them to it.
    pub(crate) controller: Option<String>,
    /// The replica count of each of the topic's partitions; `None` when it does not exist.
    pub(crate) replicas: Option<Vec<usize>>,
}

/// What the brokers' metadata says of a topic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TopicState {
    /// No broker knows it (UNKNOWN_TOPIC_OR_PARTITION).
    Missing,
    /// It has this many partitions.
    Partitions(usize),
}

/// Whether `state` makes a failure with `partition` of `topic` a configuration error, and
/// which; `None` when the topic exists with the partition (and with `expected` partitions).
pub(crate) fn verdict(
    topic: &str,
    partition: i32,
    expected: Option<i32>,
    state: TopicState,
) -> Option<String> {
    match state {
        TopicState::Missing => Some(format!(
            "topic {topic} does not exist (the brokers' metadata does not know it; a read or \
             write of it answered UNKNOWN_TOPIC_OR_PARTITION): create it, or correct the topic \
             name"
        )),
        TopicState::Partitions(n) => {
            let n = i64::try_from(n).unwrap_or(i64::MAX);
            match expected {
                Some(e) if i64::from(e) != n => Some(format!(
                    "topic {topic} has {n} partitions but this member is configured with {e}; \
                     every member must pass the topic's real partition count (set partitions = \
                     {n})"
                )),
                _ if i64::from(partition) >= n || partition < 0 => Some(format!(
                    "partition {partition} of topic {topic} does not exist: the topic has {n} \
                     partitions"
                )),
                _ => None,
            }
        }
    }
}
