//! Whether a failure with one of a topic's partitions is a configuration error, by what the
//! brokers' metadata says of the topic ([`TopicState`], read in [`crate::api::metadata`]).

use std::time::Duration;

use crate::api::metadata::TopicState;

/// How long [`Cluster::confirm`] waits between its two metadata answers: a broker that had
/// not caught up with a new topic has by then.
pub(crate) const CONFIRM_PAUSE: Duration = Duration::from_millis(500);

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
