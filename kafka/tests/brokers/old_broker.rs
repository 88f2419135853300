//! A broker older than the oldest supported release is refused when the client connects, with
//! an error that names the broker release the client judged from its APIs, the API it lacks,
//! and the oldest supported release. The broker here is a TCP listener that answers every
//! ApiVersions request as Apache Kafka 2.8 does (every API of 2.8, none of 3.0: no
//! DescribeTransactions) and nothing else; a request of any other kind is counted, and the test
//! fails if one arrives (the client must stop at the version check).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use kafka_coordination::error::ErrorKind;
use kafka_coordination_kafka::{KafkaConfig, KafkaTransport};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::ApiVersionsResponse;
use kafka_protocol::protocol::Encodable;

/// The highest version of each API key that Apache Kafka 2.8 answers (keys 0 to 61; 2.8 has
/// no key 65, DescribeTransactions, which came with 3.0).
fn kafka_2_8_api_keys() -> Vec<ApiVersion> {
    let max: &[(i16, i16)] = &[
        (0, 9),  // Produce
        (1, 12), // Fetch
        (2, 6),  // ListOffsets
        (3, 11), // Metadata
        (8, 8),  // OffsetCommit
        (9, 7),  // OffsetFetch
        (10, 3), // FindCoordinator
        (18, 3), // ApiVersions
        (19, 7), // CreateTopics
        (22, 4), // InitProducerId
        (24, 3), // AddPartitionsToTxn
        (25, 3), // AddOffsetsToTxn
        (26, 3), // EndTxn
        (28, 3), // TxnOffsetCommit
        (32, 4), // DescribeConfigs
        (60, 0), // DescribeCluster
        (61, 0), // DescribeProducers
    ];
    (0..=61)
        .map(|key| {
            let top = max.iter().find(|(k, _)| *k == key).map_or(1, |(_, v)| *v);
            ApiVersion::default()
                .with_api_key(key)
                .with_min_version(0)
                .with_max_version(top)
        })
        .collect()
}

/// Serves one connection: answers ApiVersions (whatever version was asked, in v3's shape, as a
/// 2.8 broker answers v3) and counts any other request.
fn serve(mut stream: TcpStream, others: &AtomicUsize) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(60)));
    loop {
        let mut size = [0u8; 4];
        if stream.read_exact(&mut size).is_err() {
            return;
        }
        let mut request = vec![0u8; i32::from_be_bytes(size).max(0) as usize];
        if stream.read_exact(&mut request).is_err() || request.len() < 8 {
            return;
        }
        let key = i16::from_be_bytes([request[0], request[1]]);
        let correlation = &request[4..8];
        if key != 18 {
            others.fetch_add(1, Ordering::SeqCst);
            return;
        }
        let answer = ApiVersionsResponse::default()
            .with_api_keys(kafka_2_8_api_keys())
            .with_finalized_features_epoch(-1);
        let mut body = BytesMut::new();
        answer.encode(&mut body, 3).expect("encode ApiVersions v3");
        // ApiVersions answers carry response header v0: the correlation id only.
        let mut frame = ((body.len() + 4) as i32).to_be_bytes().to_vec();
        frame.extend_from_slice(correlation);
        frame.extend_from_slice(&body);
        if stream.write_all(&frame).is_err() {
            return;
        }
    }
}

/// A listener answering as Kafka 2.8; returns its address and the count of requests other
/// than ApiVersions it received.
fn kafka_2_8_broker() -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
    let addr = listener.local_addr().expect("address").to_string();
    let others = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&others);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let counted = Arc::clone(&counted);
            std::thread::spawn(move || serve(stream, &counted));
        }
    });
    (addr, others)
}

#[test]
fn a_broker_older_than_the_floor_is_refused_at_connect_naming_its_release_and_the_missing_api() {
    let (addr, others) = kafka_2_8_broker();
    // A request timeout far longer than the test: the refusal must not be a timeout.
    let config = KafkaConfig::new(addr.as_str(), 16).with_request_timeout(Duration::from_secs(600));
    let started = Instant::now();
    let err = KafkaTransport::connect(config).expect_err("a 2.8 broker is refused");
    let message = err.to_string();
    assert_eq!(err.kind(), ErrorKind::Config, "{message}");
    assert_eq!(
        err.troubleshooting_anchor(),
        "a-broker-older-than-kafka-30",
        "{message}"
    );
    assert!(message.contains(&addr), "names the broker: {message}");
    assert!(
        message.contains("answers the APIs of Apache Kafka 2.8"),
        "names the release seen: {message}"
    );
    assert!(
        message.contains("lacks DescribeTransactions (API key 65"),
        "names the missing API: {message}"
    );
    assert!(
        message.contains("the oldest supported broker is Apache Kafka 3.0"),
        "names the floor: {message}"
    );
    assert_eq!(
        others.load(Ordering::SeqCst),
        0,
        "the client sent nothing past ApiVersions"
    );
    // Refused at the first answer, not after retries: far within the request timeout.
    assert!(
        started.elapsed() < Duration::from_secs(300),
        "refused after {:?}",
        started.elapsed()
    );
}
