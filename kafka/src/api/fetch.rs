//! Fetch (API key 1): the committed records of some partitions of one topic, read_committed,
//! from an offset each, with the partitions' last stable offsets and high watermarks. No fetch
//! session: every Fetch names its partitions. What each partition's answer means is read here:
//! its records (parsed by [`crate::batch`]), a restart at the log start, or an error that hands
//! the partition back to be looked up again or stops the read.

use std::time::Duration;

use kafka_coordination_transport::error::TransportError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::{BrokerId, FetchRequest, FetchResponse, TopicName};

use super::{Attempt, Exchange};
use crate::batch::{decode_batches, Decoded};
use crate::classify::code;

/// The highest version this client sends: v13 and later name topics by id.
pub(crate) const MAX_VERSION: i16 = 12;
/// `isolation_level` READ_COMMITTED.
pub(crate) const READ_COMMITTED: i8 = 1;

/// One Fetch of `parts` of `topic`.
pub(crate) struct Fetch<'a> {
    pub(crate) topic: &'a TopicName,
    /// Each partition with the offset its read starts at.
    pub(crate) parts: &'a [(i32, i64)],
    /// How long the broker may wait for committed records (zero: it answers at once).
    pub(crate) max_wait: Duration,
    /// The byte limit of the whole answer.
    pub(crate) max_bytes: i32,
    /// The byte limit of each partition's records.
    pub(crate) partition_max_bytes: i32,
}

/// What one partition of a Fetch answer says.
pub(crate) enum Fetched {
    /// Records (already filtered), the last stable offset and the high watermark (at least
    /// the last stable offset).
    Data {
        decoded: Decoded,
        stable: i64,
        high_watermark: i64,
    },
    /// The fetch offset is outside the log: start again from the log start.
    OutOfRange,
}

/// One partition of a Fetch answer, read.
pub(crate) struct Answered {
    pub(crate) partition: i32,
    /// The offset the partition was fetched from.
    pub(crate) from: i64,
    /// Its records, or what to do about its error.
    pub(crate) fetched: Result<Fetched, Attempt>,
}

impl Fetch<'_> {
    fn topic(&self) -> &str {
        self.topic.0.as_str()
    }

    /// Reads one partition's answer to a Fetch from offset `from`.
    fn partition(&self, from: i64, data: PartitionData) -> Result<Fetched, Attempt> {
        let topic = self.topic();
        let what = format!("reading {topic}/{}", data.partition_index);
        match code::error(data.error_code) {
            None => {}
            Some(code::E::OffsetOutOfRange) => return Ok(Fetched::OutOfRange),
            Some(code::E::TopicAuthorizationFailed) => {
                return Err(Attempt::Stop(TransportError::unauthorized(format!(
                    "{what}: the principal needs the READ ACL on Topic '{topic}' \
                     (TOPIC_AUTHORIZATION_FAILED)"
                ))))
            }
            // The leader may have moved (refresh), the topic may be new to this broker
            // (confirmed later if it persists), or the broker is busy (again): classify.rs.
            Some(e) => {
                let other = e.code();
                return Err(Attempt::from_code(
                    other,
                    format!("{what}: Fetch error {other} ({})", code::name(other)),
                ));
            }
        }
        // Before v4 brokers had no last stable offset; a read_committed answer always has one.
        let stable = if data.last_stable_offset >= 0 {
            data.last_stable_offset
        } else {
            data.high_watermark
        };
        let aborted: Vec<(i64, i64)> = data
            .aborted_transactions
            .unwrap_or_default()
            .iter()
            .map(|a| (a.producer_id.0, a.first_offset))
            .collect();
        let raw = data.records.unwrap_or_default();
        // A batch that cannot be read is skipped (and reported where the answer is applied);
        // only bytes that are no batch, or fail their CRC, fail the Fetch (tried again).
        let decoded = decode_batches(&raw, from, &aborted).map_err(|e| {
            Attempt::again(format!(
                "{what} at offset {from}: a corrupt record batch: {}",
                e.0
            ))
        })?;
        Ok(Fetched::Data {
            decoded,
            stable,
            high_watermark: data.high_watermark.max(stable),
        })
    }
}

impl Exchange for Fetch<'_> {
    type Request = FetchRequest;
    /// Each partition of the answer that was asked for, in the answer's order.
    type Output = Vec<Answered>;
    const NAME: &'static str = "Fetch";
    const MAX_VERSION: i16 = MAX_VERSION;

    fn request(&self, _version: i16) -> FetchRequest {
        let partitions = self
            .parts
            .iter()
            .map(|&(partition, offset)| {
                FetchPartition::default()
                    .with_partition(partition)
                    .with_fetch_offset(offset)
                    .with_partition_max_bytes(self.partition_max_bytes)
            })
            .collect();
        FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(i32::try_from(self.max_wait.as_millis()).unwrap_or(i32::MAX))
            .with_min_bytes(1)
            .with_max_bytes(self.max_bytes)
            .with_isolation_level(READ_COMMITTED)
            .with_session_id(0)
            .with_session_epoch(-1)
            .with_topics(vec![FetchTopic::default()
                .with_topic(self.topic.clone())
                .with_partitions(partitions)])
    }

    fn answer(
        &self,
        answer: FetchResponse,
        _version: i16,
        at: &str,
    ) -> Result<Vec<Answered>, Attempt> {
        if answer.error_code != code::NONE {
            return Err(Attempt::relookup(format!(
                "Fetch at {at}: error {} ({})",
                answer.error_code,
                code::name(answer.error_code)
            )));
        }
        Ok(answer
            .responses
            .into_iter()
            .filter(|t| t.topic == *self.topic)
            .flat_map(|t| t.partitions)
            .filter_map(|data| {
                let partition = data.partition_index;
                let &(_, from) = self.parts.iter().find(|(p, _)| *p == partition)?;
                Some(Answered {
                    partition,
                    from,
                    fetched: self.partition(from, data),
                })
            })
            .collect())
    }

    fn unsupported(&self, at: &str) -> Attempt {
        Attempt::Stop(TransportError::config(format!(
            "the broker at {at} supports no Fetch version from v4 to v{MAX_VERSION}"
        )))
    }
}

/// What the answer of the broker at `at` says of `partition`, the one partition a Fetch asked
/// for.
pub(crate) fn only(answered: Vec<Answered>, partition: i32, at: &str) -> Result<Fetched, Attempt> {
    answered
        .into_iter()
        .find(|a| a.partition == partition)
        .map(|a| a.fetched)
        .unwrap_or_else(|| {
            Err(Attempt::again(format!(
                "the Fetch answer of {at} did not mention partition {partition}"
            )))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::{Bytes, BytesMut};
    use kafka_coordination_transport::error::ErrorKind;
    use kafka_protocol::messages::fetch_response::{AbortedTransaction, FetchableTopicResponse};
    use kafka_protocol::messages::ProducerId;
    use kafka_protocol::protocol::StrBytes;
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };

    const AT: &str = "b:9092";

    fn topic() -> TopicName {
        TopicName(StrBytes::from_static_str("state"))
    }

    fn fetch<'a>(topic: &'a TopicName, parts: &'a [(i32, i64)]) -> Fetch<'a> {
        Fetch {
            topic,
            parts,
            max_wait: Duration::from_millis(500),
            max_bytes: 8 << 20,
            partition_max_bytes: 1 << 20,
        }
    }

    /// One batch of `producer_id` with a record at each of `offsets` (key "k<offset>").
    fn batch(producer_id: i64, offsets: &[i64]) -> Bytes {
        let first = offsets[0];
        let records: Vec<Record> = offsets
            .iter()
            .map(|&offset| Record {
                transactional: true,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: 0,
                producer_id,
                producer_epoch: 0,
                timestamp_type: TimestampType::Creation,
                offset,
                sequence: i32::try_from(offset - first).expect("small"),
                timestamp: 1_000,
                key: Some(Bytes::from(format!("k{offset}"))),
                value: Some(Bytes::from_static(b"v")),
                headers: Default::default(),
            })
            .collect();
        let mut buf = BytesMut::new();
        RecordBatchEncoder::encode(
            &mut buf,
            records.iter(),
            &RecordEncodeOptions {
                version: 2,
                compression: Compression::None,
            },
        )
        .expect("encode");
        buf.freeze()
    }

    fn part(partition: i32, error: i16) -> PartitionData {
        PartitionData::default()
            .with_partition_index(partition)
            .with_error_code(error)
            .with_high_watermark(20)
            .with_last_stable_offset(15)
    }

    fn answer(topic: &TopicName, parts: Vec<PartitionData>) -> FetchResponse {
        FetchResponse::default().with_responses(vec![FetchableTopicResponse::default()
            .with_topic(topic.clone())
            .with_partitions(parts)])
    }

    /// The one partition of an answer holding `data`, read as a Fetch of partition 0 from 5.
    fn read(data: PartitionData) -> Result<Fetched, Attempt> {
        let topic = topic();
        let x = fetch(&topic, &[(0, 5)]);
        let answered = x
            .answer(answer(&topic, vec![data]), MAX_VERSION, AT)
            .ok()
            .expect("no request-level error");
        only(answered, 0, AT)
    }

    fn stop(outcome: Result<Fetched, Attempt>) -> TransportError {
        match outcome {
            Err(Attempt::Stop(e)) => e,
            _ => panic!("expected the read to stop"),
        }
    }

    #[test]
    fn the_request_names_each_partition_from_its_offset_read_committed() {
        let topic = topic();
        let req = fetch(&topic, &[(3, 40), (1, 7)]).request(MAX_VERSION);
        assert_eq!(req.replica_id, BrokerId(-1));
        assert_eq!(req.max_wait_ms, 500);
        assert_eq!((req.min_bytes, req.max_bytes), (1, 8 << 20));
        assert_eq!(req.isolation_level, READ_COMMITTED);
        assert_eq!((req.session_id, req.session_epoch), (0, -1));
        assert_eq!(req.topics.len(), 1);
        assert_eq!(req.topics[0].topic, topic);
        let parts: Vec<(i32, i64, i32)> = req.topics[0]
            .partitions
            .iter()
            .map(|p| (p.partition, p.fetch_offset, p.partition_max_bytes))
            .collect();
        assert_eq!(parts, vec![(3, 40, 1 << 20), (1, 7, 1 << 20)]);
        // A wait too long for the field is the longest it holds.
        let mut x = fetch(&topic, &[(0, 0)]);
        x.max_wait = Duration::from_secs(u64::MAX / 4);
        assert_eq!(x.request(MAX_VERSION).max_wait_ms, i32::MAX);
    }

    #[test]
    fn records_are_read_from_the_offset_with_aborted_transactions_removed() {
        let mut raw = BytesMut::new();
        raw.extend_from_slice(&batch(7, &[4, 5, 6]));
        raw.extend_from_slice(&batch(8, &[7]));
        let data = part(0, 0)
            .with_records(Some(raw.freeze()))
            .with_aborted_transactions(Some(vec![AbortedTransaction::default()
                .with_producer_id(ProducerId(8))
                .with_first_offset(7)]));
        match read(data) {
            Ok(Fetched::Data {
                decoded,
                stable,
                high_watermark,
            }) => {
                let offsets: Vec<i64> = decoded.records.iter().map(|r| r.offset).collect();
                assert_eq!(
                    offsets,
                    vec![5, 6],
                    "before the offset and aborted: left out"
                );
                assert_eq!(decoded.next, 8);
                assert_eq!((stable, high_watermark), (15, 20));
            }
            _ => panic!("a good partition gives its records"),
        }
    }

    #[test]
    fn without_a_last_stable_offset_the_high_watermark_stands_for_it() {
        let data = part(0, 0).with_last_stable_offset(-1);
        match read(data) {
            Ok(Fetched::Data {
                decoded,
                stable,
                high_watermark,
            }) => {
                assert!(decoded.records.is_empty());
                assert_eq!(decoded.next, 5, "nothing read: the view stays where it was");
                assert_eq!((stable, high_watermark), (20, 20));
            }
            _ => panic!("a good partition gives its limits"),
        }
        // A high watermark reported below the last stable offset is raised to it.
        match read(part(0, 0).with_high_watermark(10)) {
            Ok(Fetched::Data { high_watermark, .. }) => assert_eq!(high_watermark, 15),
            _ => panic!("a good partition gives its limits"),
        }
    }

    #[test]
    fn a_corrupt_batch_is_tried_again() {
        // A batch header whose length is negative.
        let mut raw = vec![0u8; 12];
        raw[8..12].copy_from_slice(&(-1i32).to_be_bytes());
        match read(part(0, 0).with_records(Some(Bytes::from(raw)))) {
            Err(Attempt::Again { relookup, why, .. }) => {
                assert!(!relookup);
                assert!(
                    why.starts_with("reading state/0 at offset 5: a corrupt record batch"),
                    "{why}"
                );
            }
            _ => panic!("a corrupt batch is tried again"),
        }
    }

    #[test]
    fn each_partition_error_is_read_for_what_it_means() {
        // OFFSET_OUT_OF_RANGE: the read starts again at the log start.
        assert!(matches!(read(part(0, 1)), Ok(Fetched::OutOfRange)));
        // TOPIC_AUTHORIZATION_FAILED names the ACL to grant.
        let e = stop(read(part(0, 29)));
        assert_eq!(e.kind(), ErrorKind::Unauthorized);
        assert!(
            e.to_string().contains(
                "reading state/0: the principal needs the READ ACL on Topic 'state' \
                 (TOPIC_AUTHORIZATION_FAILED)"
            ),
            "{e}"
        );
        // NOT_LEADER_OR_FOLLOWER: the leader is looked up again.
        match read(part(0, 6)) {
            Err(Attempt::Again {
                relookup: true,
                code: Some(6),
                why,
            }) => assert_eq!(
                why,
                "reading state/0: Fetch error 6 (NOT_LEADER_OR_FOLLOWER)"
            ),
            _ => panic!("a moved leader is looked up again"),
        }
        // UNKNOWN_TOPIC_OR_PARTITION keeps its code (the metadata confirms it later).
        assert!(matches!(
            read(part(0, 3)),
            Err(Attempt::Again { code: Some(3), .. })
        ));
        // An error no retry mends stops the read with its code.
        let e = stop(read(part(0, 87)));
        assert_eq!(e.kafka_code(), Some(87));
    }

    #[test]
    fn only_the_partitions_asked_for_are_read_and_a_request_error_looks_the_leader_up() {
        let topic = topic();
        let other = TopicName(StrBytes::from_static_str("other"));
        let x = fetch(&topic, &[(0, 5), (2, 9)]);
        let mut resp = answer(&topic, vec![part(2, 0), part(1, 0), part(0, 1)]);
        resp.responses.push(
            FetchableTopicResponse::default()
                .with_topic(other)
                .with_partitions(vec![part(0, 0)]),
        );
        let answered = x.answer(resp, MAX_VERSION, AT).ok().expect("read");
        let read: Vec<(i32, i64, bool)> = answered
            .iter()
            .map(|a| {
                (
                    a.partition,
                    a.from,
                    matches!(a.fetched, Ok(Fetched::OutOfRange)),
                )
            })
            .collect();
        assert_eq!(read, vec![(2, 9, false), (0, 5, true)]);
        match only(answered, 1, AT) {
            Err(Attempt::Again { relookup, why, .. }) => {
                assert!(!relookup);
                assert_eq!(
                    why,
                    "the Fetch answer of b:9092 did not mention partition 1"
                );
            }
            _ => panic!("a partition left out is asked again"),
        }
        // A request-level error: the leader is looked up again.
        match x.answer(
            FetchResponse::default().with_error_code(58),
            MAX_VERSION,
            AT,
        ) {
            Err(Attempt::Again { relookup, why, .. }) => {
                assert!(relookup);
                assert_eq!(
                    why,
                    "Fetch at b:9092: error 58 (SASL_AUTHENTICATION_FAILED)"
                );
            }
            _ => panic!("a request-level error looks the leader up again"),
        }
        match x.unsupported(AT) {
            Attempt::Stop(e) => assert_eq!(e.kind(), ErrorKind::Config),
            _ => panic!("no version in common stops the read"),
        }
    }
}
