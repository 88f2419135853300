//! Well-formed answers of every API and version in
//! [`response_shapes::SHAPES`](super::response_shapes::SHAPES), encoded by `kafka-protocol`,
//! with every array (nested ones too) holding elements and the known tagged fields set: the
//! shapes' tests check them, and the fuzz harness mutates them.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{
    add_partitions_to_txn_response as add, api_versions_response as api,
    create_topics_response as created, describe_configs_response as configs,
    describe_producers_response as producers, describe_transactions_response as txn,
    fetch_response as fetch, find_coordinator_response as coord, list_offsets_response as list,
    metadata_response as meta, produce_response as produce, AddPartitionsToTxnResponse,
    ApiVersionsResponse, BrokerId, CreateTopicsResponse, DescribeConfigsResponse,
    DescribeProducersResponse, DescribeTransactionsResponse, EndTxnResponse, FetchResponse,
    FindCoordinatorResponse, InitProducerIdResponse, ListOffsetsResponse, MetadataResponse,
    ProduceResponse, ProducerId, SaslAuthenticateResponse, SaslHandshakeResponse, TopicName,
    TransactionalId,
};
use kafka_protocol::protocol::{Encodable, StrBytes};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

fn s(text: &'static str) -> StrBytes {
    StrBytes::from_static_str(text)
}

fn topic(text: &'static str) -> TopicName {
    TopicName(s(text))
}

/// One transactional record batch of two records at offsets 40 and 41, and a commit marker of
/// the same producer at 42: what a Fetch of the state topic returns.
pub(crate) fn record_batches() -> Bytes {
    let record = |offset: i64, control: bool, key: &'static [u8], value: &'static [u8]| Record {
        transactional: true,
        control,
        delete_horizon: false,
        partition_leader_epoch: 0,
        producer_id: 7,
        producer_epoch: 3,
        timestamp_type: TimestampType::Creation,
        offset,
        sequence: if control { -1 } else { (offset - 40) as i32 },
        timestamp: 1_700_000_000_000,
        key: Some(Bytes::from_static(key)),
        value: Some(Bytes::from_static(value)),
        headers: Default::default(),
    };
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    let mut buf = BytesMut::new();
    let data = [
        record(40, false, b"\0\0\0\0\0\x01r\0\x01m", b"registration"),
        record(41, false, b"\0\0\0\x01\0\x01r\0\0", b"lease"),
    ];
    // Encoding fixed records into a growable buffer cannot fail.
    let _ = RecordBatchEncoder::encode(&mut buf, data.iter(), &options);
    let marker = [record(42, true, b"\0\0\0\x01", b"\0\0\0\0\0\x05")];
    let _ = RecordBatchEncoder::encode(&mut buf, marker.iter(), &options);
    buf.freeze()
}

fn encode(message: &impl Encodable, version: i16) -> Vec<u8> {
    let mut buf = BytesMut::new();
    match message.encode(&mut buf, version) {
        Ok(()) => buf.to_vec(),
        // A sample that does not encode at a version it is built for is a bug of this file;
        // its test names it (an empty body never passes the shape check).
        Err(_) => Vec::new(),
    }
}

/// `(api key, version, body)` for every API and version the client reads.
pub(crate) fn samples() -> Vec<(i16, i16, Vec<u8>)> {
    let mut out = Vec::new();
    for shape in super::response_shapes::SHAPES {
        for v in shape.versions.0..=shape.versions.1 {
            out.push((shape.api_key, v, sample(shape.api_key, v)));
        }
    }
    out
}

fn sample(api_key: i16, v: i16) -> Vec<u8> {
    match api_key {
        18 => encode(&api_versions(v), v),
        17 => encode(
            &SaslHandshakeResponse::default()
                .with_error_code(33)
                .with_mechanisms(vec![s("PLAIN"), s("SCRAM-SHA-512")]),
            v,
        ),
        36 => encode(
            &SaslAuthenticateResponse::default()
                .with_error_message(Some(s("no")))
                .with_auth_bytes(Bytes::from_static(b"r=abc,s=c2FsdA==,i=4096")),
            v,
        ),
        10 => encode(&find_coordinator(v), v),
        3 => encode(&metadata(v), v),
        22 => encode(
            &InitProducerIdResponse::default()
                .with_producer_id(ProducerId(1001))
                .with_producer_epoch(4),
            v,
        ),
        24 => encode(
            &AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(vec![
                add::AddPartitionsToTxnTopicResult::default()
                    .with_name(topic("t"))
                    .with_results_by_partition(vec![
                        add::AddPartitionsToTxnPartitionResult::default().with_partition_index(2),
                    ]),
            ]),
            v,
        ),
        0 => encode(&produce_response(v), v),
        26 => encode(&EndTxnResponse::default().with_error_code(48), v),
        25 => encode(
            &kafka_protocol::messages::AddOffsetsToTxnResponse::default().with_error_code(51),
            v,
        ),
        28 => encode(&txn_offset_commit(), v),
        9 => encode(&offset_fetch(), v),
        65 => encode(
            &DescribeTransactionsResponse::default().with_transaction_states(vec![
                txn::TransactionState::default()
                    .with_transactional_id(TransactionalId(s("role")))
                    .with_transaction_state(s("Ongoing"))
                    .with_producer_id(ProducerId(1001))
                    .with_topics(vec![txn::TopicData::default()
                        .with_topic(topic("__coordination_state"))
                        .with_partitions(vec![1, 2])]),
            ]),
            v,
        ),
        61 => encode(
            &DescribeProducersResponse::default().with_topics(vec![
                producers::TopicResponse::default()
                    .with_name(topic("t"))
                    .with_partitions(vec![producers::PartitionResponse::default()
                        .with_error_message(Some(s("m")))
                        .with_active_producers(vec![
                            producers::ProducerState::default().with_last_sequence(9)
                        ])]),
            ]),
            v,
        ),
        1 => encode(&fetch_response(v), v),
        2 => encode(
            &ListOffsetsResponse::default().with_topics(vec![
                list::ListOffsetsTopicResponse::default()
                    .with_name(topic("t"))
                    .with_partitions(vec![
                        list::ListOffsetsPartitionResponse::default().with_offset(12)
                    ]),
            ]),
            v,
        ),
        32 => encode(
            &DescribeConfigsResponse::default().with_results(vec![
                configs::DescribeConfigsResult::default()
                    .with_error_message(Some(s("m")))
                    .with_resource_type(2)
                    .with_resource_name(s("t"))
                    .with_configs(vec![configs::DescribeConfigsResourceResult::default()
                        .with_name(s("cleanup.policy"))
                        .with_value(Some(s("compact")))
                        .with_config_source(1)
                        .with_synonyms(vec![configs::DescribeConfigsSynonym::default()
                            .with_name(s("log.cleanup.policy"))
                            .with_value(Some(s("delete")))
                            .with_source(5)])
                        .with_config_type(2)
                        .with_documentation(Some(s("d")))]),
            ]),
            v,
        ),
        19 => encode(
            &CreateTopicsResponse::default().with_topics(vec![
                created::CreatableTopicResult::default()
                    .with_name(topic("__coordination_state"))
                    .with_error_code(36)
                    .with_error_message(Some(s("exists")))
                    .with_topic_config_error_code(40)
                    .with_num_partitions(16)
                    .with_replication_factor(3)
                    .with_configs(Some(vec![created::CreatableTopicConfigs::default()
                        .with_name(s("cleanup.policy"))
                        .with_value(Some(s("compact")))
                        .with_config_source(1)])),
            ]),
            v,
        ),
        _ => Vec::new(),
    }
}

fn api_versions(v: i16) -> ApiVersionsResponse {
    let mut r = ApiVersionsResponse::default().with_api_keys(vec![
        api::ApiVersion::default().with_max_version(9),
        api::ApiVersion::default()
            .with_api_key(65)
            .with_max_version(0),
    ]);
    if v >= 3 {
        r = r
            .with_supported_features(vec![api::SupportedFeatureKey::default()
                .with_name(s("transaction.version"))
                .with_max_version(2)])
            .with_finalized_features_epoch(5)
            .with_finalized_features(vec![api::FinalizedFeatureKey::default()
                .with_name(s("transaction.version"))
                .with_max_version_level(2)])
            .with_zk_migration_ready(true);
    }
    r
}

fn find_coordinator(v: i16) -> FindCoordinatorResponse {
    if v >= 4 {
        FindCoordinatorResponse::default().with_coordinators(vec![coord::Coordinator::default()
            .with_key(s("role"))
            .with_host(s("broker-1"))
            .with_port(9092)
            .with_error_message(Some(s("fine")))])
    } else {
        let r = FindCoordinatorResponse::default()
            .with_host(s("broker-1"))
            .with_port(9092);
        if v >= 1 {
            r.with_error_message(Some(s("fine")))
        } else {
            r
        }
    }
}

fn metadata(v: i16) -> MetadataResponse {
    let mut partition = meta::MetadataResponsePartition::default()
        .with_partition_index(3)
        .with_leader_id(BrokerId(1))
        .with_replica_nodes(vec![BrokerId(1), BrokerId(2)])
        .with_isr_nodes(vec![BrokerId(1)]);
    if v >= 5 {
        partition = partition.with_offline_replicas(vec![BrokerId(2)]);
    }
    let mut broker = meta::MetadataResponseBroker::default()
        .with_node_id(BrokerId(1))
        .with_host(s("broker-1"))
        .with_port(9092);
    if v >= 1 {
        broker = broker.with_rack(Some(s("rack-a")));
    }
    let mut r = MetadataResponse::default()
        .with_brokers(vec![broker])
        .with_topics(vec![meta::MetadataResponseTopic::default()
            .with_name(Some(topic("__coordination_state")))
            .with_partitions(vec![partition])]);
    if v >= 2 {
        r = r.with_cluster_id(Some(s("cluster")));
    }
    r
}

fn produce_response(v: i16) -> ProduceResponse {
    let mut partition = produce::PartitionProduceResponse::default()
        .with_index(1)
        .with_base_offset(77);
    if v >= 8 {
        partition = partition
            .with_record_errors(vec![produce::BatchIndexAndErrorMessage::default()
                .with_batch_index(0)
                .with_batch_index_error_message(Some(s("bad")))])
            .with_error_message(Some(s("worse")));
    }
    ProduceResponse::default().with_responses(vec![produce::TopicProduceResponse::default()
        .with_name(topic("t"))
        .with_partition_responses(vec![partition])])
}

fn fetch_response(v: i16) -> FetchResponse {
    let mut partition = fetch::PartitionData::default()
        .with_partition_index(1)
        .with_high_watermark(43)
        .with_last_stable_offset(43)
        .with_aborted_transactions(Some(vec![fetch::AbortedTransaction::default()
            .with_producer_id(ProducerId(9))
            .with_first_offset(12)]))
        .with_records(Some(record_batches()));
    if v >= 12 {
        partition = partition
            .with_diverging_epoch(
                fetch::EpochEndOffset::default()
                    .with_epoch(4)
                    .with_end_offset(40),
            )
            .with_current_leader(
                fetch::LeaderIdAndEpoch::default()
                    .with_leader_id(BrokerId(1))
                    .with_leader_epoch(4),
            )
            .with_snapshot_id(
                fetch::SnapshotId::default()
                    .with_end_offset(40)
                    .with_epoch(4),
            );
    }
    FetchResponse::default().with_responses(vec![fetch::FetchableTopicResponse::default()
        .with_topic(topic("__coordination_state"))
        .with_partitions(vec![partition])])
}

fn txn_offset_commit() -> kafka_protocol::messages::TxnOffsetCommitResponse {
    use kafka_protocol::messages::txn_offset_commit_response as t;
    kafka_protocol::messages::TxnOffsetCommitResponse::default().with_topics(vec![
        t::TxnOffsetCommitResponseTopic::default()
            .with_name(topic("in"))
            .with_partitions(vec![t::TxnOffsetCommitResponsePartition::default()
                .with_partition_index(1)
                .with_error_code(51)]),
    ])
}

fn offset_fetch() -> kafka_protocol::messages::OffsetFetchResponse {
    use kafka_protocol::messages::offset_fetch_response as o;
    kafka_protocol::messages::OffsetFetchResponse::default().with_topics(vec![
        o::OffsetFetchResponseTopic::default()
            .with_name(topic("in"))
            .with_partitions(vec![o::OffsetFetchResponsePartition::default()
                .with_partition_index(1)
                .with_committed_offset(42)
                .with_metadata(Some(s("m")))
                .with_error_code(88)]),
    ])
}
