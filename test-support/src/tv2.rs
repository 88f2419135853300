//! A bare transactional client that opts into transaction version 2 (KIP-890 part 2), the way
//! franz-go's defaults and Apache Kafka's Java client 4.x do: InitProducerId, then per
//! transaction a Produce v12 of a transactional batch (no AddPartitionsToTxn from the client:
//! on a TV2 cluster the partition leader adds the partition itself) and EndTxn v5, whose answer
//! carries the producer's new pair. Plain TCP only, one broker connection per address, no
//! retries beyond the transient answers a fresh transaction meets. For tests: it shows what such
//! a member looks like to this library.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::thread;
use std::time::{Duration, Instant};

use bytes::{Buf, BytesMut};
use kafka_coordination::core::token::FencingToken;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    EndTxnRequest, FindCoordinatorRequest, InitProducerIdRequest, MetadataRequest, ProduceRequest,
    ProducerId, RequestHeader, ResponseHeader, TopicName, TransactionalId,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

/// Error codes the client waits out: a partition with no leader yet or a topic not known yet
/// (6, 3), a coordinator loading, away or moved (14, 15, 16), the previous transaction still
/// being completed (51).
const TRANSIENT: &[i16] = &[3, 6, 14, 15, 16, 51];

/// Why the broker at the first address of `bootstrap` cannot serve this client, if it cannot:
/// asked of the broker itself (ApiVersions v3). Transaction version 2 needs Kafka 4.0 or newer
/// with `transaction.version` finalized at 2 or more, InitProducerId v5, Produce v12 and EndTxn
/// v5; a test that needs it skips, loudly, with this reason, and runs wherever the broker has it.
pub fn lacking(bootstrap: &str) -> Option<String> {
    use kafka_protocol::messages::ApiVersionsRequest;
    let mut probe = Tv2Client::unstarted(bootstrap, "");
    let addr = probe.bootstrap.clone();
    let resp = probe.call(
        &addr,
        &ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("tv2-test-client"))
            .with_client_software_version(StrBytes::from_static_str("1")),
        3,
    );
    let level = resp
        .finalized_features
        .iter()
        .find(|f| f.name.as_str() == "transaction.version")
        .map_or(0, |f| f.max_version_level);
    let max = |key: i16| {
        resp.api_keys
            .iter()
            .find(|k| k.api_key == key)
            .map_or(-1, |k| k.max_version)
    };
    let mut missing = Vec::new();
    if level < 2 {
        missing.push(format!("finalized transaction.version is {level}, not 2"));
    }
    for (name, key, need) in [
        ("InitProducerId", 22, 5),
        ("Produce", 0, 12),
        ("EndTxn", 26, 5),
    ] {
        if max(key) < need {
            missing.push(format!("{name} goes up to v{}, not v{need}", max(key)));
        }
    }
    (!missing.is_empty()).then(|| {
        format!(
            "the broker at {addr} has no transaction version 2 (Kafka 4.0 and newer): {}",
            missing.join("; ")
        )
    })
}

pub struct Tv2Client {
    transactional_id: String,
    conns: HashMap<String, (TcpStream, i32)>,
    bootstrap: String,
    /// The producer's current pair (moves at every commit).
    pub pair: FencingToken,
    /// The pair InitProducerId granted.
    pub minted: FencingToken,
}

impl Tv2Client {
    /// A client of `transactional_id` on the first broker of `bootstrap`, holding no pair yet.
    fn unstarted(bootstrap: &str, transactional_id: &str) -> Tv2Client {
        Tv2Client {
            transactional_id: transactional_id.to_owned(),
            conns: HashMap::new(),
            bootstrap: bootstrap
                .split(',')
                .next()
                .expect("an address")
                .trim()
                .to_owned(),
            pair: FencingToken::NO_EPOCH,
            minted: FencingToken::NO_EPOCH,
        }
    }

    /// InitProducerId for `transactional_id` (a transaction timeout of `timeout`) at its
    /// coordinator.
    pub fn init(bootstrap: &str, transactional_id: &str, timeout: Duration) -> Tv2Client {
        let mut c = Tv2Client::unstarted(bootstrap, transactional_id);
        let coordinator = c.coordinator();
        let req = InitProducerIdRequest::default()
            .with_transactional_id(Some(TransactionalId(StrBytes::from_string(
                transactional_id.to_owned(),
            ))))
            .with_transaction_timeout_ms(timeout.as_millis() as i32)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
        let resp = c.until_settled("InitProducerId", |c| {
            let r = c.call(&coordinator, &req, 5);
            (r.error_code, r)
        });
        c.pair = FencingToken::new(resp.producer_id.0, resp.producer_epoch);
        c.minted = c.pair;
        c
    }

    /// One transaction: `key`/`value` produced to `topic`/`partition` with the current pair,
    /// then committed with EndTxn v5. Returns the pair the commit handed out.
    pub fn commit_one(
        &mut self,
        topic: &str,
        partition: i32,
        key: &[u8],
        value: &[u8],
    ) -> FencingToken {
        let leader = self.leader_of(topic, partition);
        let batch = self.batch(key, value);
        let req = ProduceRequest::default()
            .with_transactional_id(Some(self.tid()))
            .with_acks(-1)
            .with_timeout_ms(10_000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(partition)
                    .with_records(Some(batch))])]);
        self.until_settled("Produce v12", |c| {
            let r = c.call(&leader, &req, 12);
            let code = r
                .responses
                .iter()
                .flat_map(|t| t.partition_responses.iter())
                .map(|p| p.error_code)
                .find(|&e| e != 0)
                .unwrap_or(0);
            (code, ())
        });
        let coordinator = self.coordinator();
        let req = EndTxnRequest::default()
            .with_transactional_id(self.tid())
            .with_producer_id(ProducerId(self.pair.producer_id))
            .with_producer_epoch(self.pair.producer_epoch)
            .with_committed(true);
        let resp = self.until_settled("EndTxn v5", |c| {
            let r = c.call(&coordinator, &req, 5);
            (r.error_code, r)
        });
        self.pair = FencingToken::new(resp.producer_id.0, resp.producer_epoch);
        self.pair
    }

    fn tid(&self) -> TransactionalId {
        TransactionalId(StrBytes::from_string(self.transactional_id.clone()))
    }

    /// One transactional record with the current pair, sequence 0 (a new epoch for every
    /// transaction under TV2, and sequences start at 0 for each).
    fn batch(&self, key: &[u8], value: &[u8]) -> bytes::Bytes {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("time")
            .as_millis() as i64;
        let record = Record {
            transactional: true,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: self.pair.producer_id,
            producer_epoch: self.pair.producer_epoch,
            timestamp_type: TimestampType::Creation,
            offset: 0,
            sequence: 0,
            timestamp: now,
            key: Some(bytes::Bytes::copy_from_slice(key)),
            value: Some(bytes::Bytes::copy_from_slice(value)),
            headers: Default::default(),
        };
        let mut out = BytesMut::new();
        RecordBatchEncoder::encode(
            &mut out,
            [record].iter(),
            &RecordEncodeOptions {
                version: 2,
                compression: Compression::None,
            },
        )
        .expect("a batch");
        out.freeze()
    }

    /// The transaction coordinator's address (FindCoordinator v3, key type 1).
    fn coordinator(&mut self) -> String {
        let bootstrap = self.bootstrap.clone();
        let req = FindCoordinatorRequest::default()
            .with_key(StrBytes::from_string(self.transactional_id.clone()))
            .with_key_type(1);
        let resp = self.until_settled("FindCoordinator", |c| {
            let r = c.call(&bootstrap, &req, 3);
            (r.error_code, r)
        });
        format!("{}:{}", resp.host.as_str(), resp.port)
    }

    /// The leader of `topic`/`partition` (Metadata v9).
    fn leader_of(&mut self, topic: &str, partition: i32) -> String {
        let bootstrap = self.bootstrap.clone();
        let req =
            MetadataRequest::default().with_topics(Some(vec![MetadataRequestTopic::default()
                .with_name(Some(TopicName(StrBytes::from_string(topic.to_owned()))))]));
        self.until_settled("Metadata", |c| {
            let r = c.call(&bootstrap, &req, 9);
            let leader = r
                .topics
                .iter()
                .flat_map(|t| t.partitions.iter())
                .find(|p| p.partition_index == partition)
                .map(|p| p.leader_id.0)
                .and_then(|id| r.brokers.iter().find(|b| b.node_id.0 == id))
                .map(|b| format!("{}:{}", b.host.as_str(), b.port));
            match leader {
                Some(addr) => (0, addr),
                None => (6, String::new()),
            }
        })
    }

    /// Repeats `attempt` while it answers a transient error code, for at most 20 s; panics on
    /// any other error.
    fn until_settled<T>(
        &mut self,
        what: &str,
        mut attempt: impl FnMut(&mut Self) -> (i16, T),
    ) -> T {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let (code, answer) = attempt(self);
            match code {
                0 => return answer,
                c if TRANSIENT.contains(&c) && Instant::now() < deadline => {
                    thread::sleep(Duration::from_millis(50));
                }
                c => panic!(
                    "{what} for '{}' failed with error {c}",
                    self.transactional_id
                ),
            }
        }
    }

    /// Sends `req` at `version` to `addr` and returns its answer.
    fn call<R: Request>(&mut self, addr: &str, req: &R, version: i16) -> R::Response {
        let (stream, correlation) = self.conns.entry(addr.to_owned()).or_insert_with(|| {
            let s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
            s.set_read_timeout(Some(Duration::from_secs(30)))
                .expect("timeout");
            (s, 0)
        });
        *correlation += 1;
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(*correlation)
            .with_client_id(Some(StrBytes::from_static_str("tv2-test-client")));
        let mut buf = BytesMut::new();
        header
            .encode(&mut buf, R::header_version(version))
            .expect("header");
        req.encode(&mut buf, version).expect("request");
        let mut frame = (buf.len() as i32).to_be_bytes().to_vec();
        frame.extend_from_slice(&buf);
        stream.write_all(&frame).expect("send");
        let mut len = [0u8; 4];
        stream.read_exact(&mut len).expect("answer length");
        let mut body = vec![0u8; i32::from_be_bytes(len) as usize];
        stream.read_exact(&mut body).expect("answer");
        let mut body = bytes::Bytes::from(body);
        let h = ResponseHeader::decode(
            &mut body,
            <R::Response as HeaderVersion>::header_version(version),
        )
        .expect("answer header");
        assert_eq!(h.correlation_id, *correlation, "answer to another request");
        let resp = R::Response::decode(&mut body, version).expect("answer body");
        assert_eq!(body.remaining(), 0, "bytes left after the answer");
        resp
    }
}
