//! The oldest broker this client works with: the APIs (and versions) it needs, checked once per
//! connection against the broker's ApiVersions answer, and a rough guess of the broker's
//! release from the APIs it answers, for the error that refuses an older one.

use kafka_protocol::messages::ApiKey;

/// The oldest Apache Kafka release this client supports: the first with DescribeTransactions.
pub(crate) const OLDEST_SUPPORTED_KAFKA: &str = "3.0";

/// One need: an API at a lowest version, what for, and the Kafka release that brought it.
struct Need {
    key: ApiKey,
    name: &'static str,
    min: i16,
    what_for: &'static str,
    since: &'static str,
}

/// What this client sends and cannot do without, newest first (the first missing one is named).
const NEEDS: &[Need] = &[
    Need {
        key: ApiKey::DescribeTransactions,
        name: "DescribeTransactions",
        min: 0,
        what_for: "the check before a challenge, `describe`",
        since: "3.0",
    },
    Need {
        key: ApiKey::DescribeProducers,
        name: "DescribeProducers",
        min: 0,
        what_for: "the state of a partition's open transactions",
        since: "2.8",
    },
    Need {
        key: ApiKey::InitProducerId,
        name: "InitProducerId",
        min: 3,
        what_for: "bumping the epoch of a known producer (KIP-360)",
        since: "2.5",
    },
    Need {
        key: ApiKey::FindCoordinator,
        name: "FindCoordinator",
        min: 1,
        what_for: "the transaction coordinator of a role",
        since: "0.11",
    },
    Need {
        key: ApiKey::AddPartitionsToTxn,
        name: "AddPartitionsToTxn",
        min: 0,
        what_for: "transactions",
        since: "0.11",
    },
    Need {
        key: ApiKey::EndTxn,
        name: "EndTxn",
        min: 0,
        what_for: "transactions",
        since: "0.11",
    },
    Need {
        key: ApiKey::Produce,
        name: "Produce",
        min: 3,
        what_for: "transactional record batches",
        since: "0.11",
    },
    Need {
        key: ApiKey::Fetch,
        name: "Fetch",
        min: 4,
        what_for: "read_committed reads up to the last stable offset",
        since: "0.11",
    },
    Need {
        key: ApiKey::ListOffsets,
        name: "ListOffsets",
        min: 2,
        what_for: "read_committed offsets",
        since: "0.11",
    },
    Need {
        key: ApiKey::Metadata,
        name: "Metadata",
        min: 1,
        what_for: "the cluster's brokers and partition leaders",
        since: "0.10",
    },
];

/// API keys that a release added, newest release first: a broker answering one of them is at
/// least that release (a guess: a broker may leave an API out, and other implementations
/// choose their own sets).
const RELEASES: &[(i16, &str)] = &[
    (80, "3.9"),
    (75, "3.8"),
    (71, "3.7"),
    (65, "3.0"),
    (61, "2.8"),
    (57, "2.7"),
    (48, "2.6"),
    (47, "2.4"),
    (44, "2.3"),
    (43, "2.2"),
];

/// The release of a broker that answers `keys`, roughly: "Kafka 2.8" (the newest release whose
/// marker API it answers, and none newer), or "older than Kafka 2.2".
pub(crate) fn release_guess(keys: &[i16]) -> String {
    RELEASES
        .iter()
        .find(|(key, _)| keys.contains(key))
        .map_or_else(
            || format!("older than Apache Kafka {}", RELEASES[RELEASES.len() - 1].1),
            |(_, release)| format!("Apache Kafka {release}"),
        )
}

/// Checks the broker's APIs: `usable(key)` is the highest version of `key` that both sides
/// speak, if any. `Err` says which need is missing, what the broker seems to be, and the oldest
/// supported release.
pub(crate) fn check(
    addr: &str,
    broker_keys: &[i16],
    usable: impl Fn(i16) -> Option<i16>,
) -> Result<(), String> {
    let missing: Vec<&Need> = NEEDS
        .iter()
        .filter(|n| usable(n.key as i16).is_none_or(|v| v < n.min))
        .collect();
    let Some(first) = missing.first() else {
        return Ok(());
    };
    let version = if first.min > 0 {
        format!(" v{}", first.min)
    } else {
        String::new()
    };
    let mut message = format!(
        "the broker at {addr} is too old for this client: it answers the APIs of {}, and lacks \
         {}{version} (API key {}; {}; Kafka {} and newer); the oldest supported broker is \
         Apache Kafka {OLDEST_SUPPORTED_KAFKA}",
        release_guess(broker_keys),
        first.name,
        first.key as i16,
        first.what_for,
        first.since,
    );
    if missing.len() > 1 {
        let others: Vec<&str> = missing[1..].iter().map(|n| n.name).collect();
        message.push_str(&format!(" (it also lacks {})", others.join(", ")));
    }
    Err(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every API and version a 3.0 broker answers, roughly (the needs only).
    fn kafka_3_0(key: i16) -> Option<i16> {
        NEEDS
            .iter()
            .find(|n| n.key as i16 == key)
            .map(|n| n.min + 1)
    }

    #[test]
    fn a_broker_with_every_need_passes() {
        assert_eq!(check("b:9092", &[65, 61], kafka_3_0), Ok(()));
    }

    #[test]
    fn a_broker_without_describe_transactions_is_named_with_its_release_and_the_floor() {
        let keys: Vec<i16> = (0..=61).collect();
        let why = check("b:9092", &keys, |k| kafka_3_0(k).filter(|_| k != 65)).unwrap_err();
        assert!(why.contains("b:9092"), "{why}");
        assert!(why.contains("Apache Kafka 2.8"), "{why}");
        assert!(
            why.contains("lacks DescribeTransactions (API key 65"),
            "{why}"
        );
        assert!(
            why.contains("oldest supported broker is Apache Kafka 3.0"),
            "{why}"
        );
        assert!(!why.contains("also lacks"), "{why}");
    }

    #[test]
    fn an_old_init_producer_id_is_named_with_its_version() {
        let why = check("b:9092", &[47], |k| match k {
            22 => Some(2),
            65 | 61 => None,
            _ => kafka_3_0(k),
        })
        .unwrap_err();
        assert!(why.contains("Apache Kafka 2.4"), "{why}");
        assert!(why.contains("lacks DescribeTransactions"), "{why}");
        assert!(
            why.contains("also lacks DescribeProducers, InitProducerId"),
            "{why}"
        );
    }

    #[test]
    fn the_release_guess_reads_the_newest_marker() {
        assert_eq!(release_guess(&[0, 1, 65, 61, 80]), "Apache Kafka 3.9");
        assert_eq!(release_guess(&[0, 1, 18]), "older than Apache Kafka 2.2");
    }
}
