//! ApiVersions (API key 18), the first request on every connection: which APIs and versions
//! the broker answers, and the cluster's finalized `transaction.version` feature level.

use std::collections::HashMap;

use kafka_coordination_transport::error::TransportError;
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::protocol::StrBytes;

use super::{Attempt, Exchange};

/// The one version this client sends (KIP-511: it names the client software).
pub(crate) const VERSION: i16 = 3;

/// UNSUPPORTED_VERSION, which a broker older than ApiVersions v3 answers in v0's shape.
const UNSUPPORTED_VERSION: i16 = 35;

/// The question, with nothing to fill in.
pub(crate) struct ApiVersions;

/// What a connection keeps of the answer.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Negotiated {
    /// For each API both sides know, the highest version both speak.
    pub(crate) versions: HashMap<i16, i16>,
    /// Every API key the broker listed, known here or not.
    pub(crate) broker_keys: Vec<i16>,
    /// The cluster's finalized `transaction.version` level (a feature at level 0 is not
    /// listed, so its absence is 0), or `None` when the broker announced no finalized features
    /// at all (epoch -1: no feature versioning, or not known yet).
    pub(crate) transaction_version: Option<i16>,
}

impl ApiVersions {
    /// Reads the start of an answer's body before its shape is checked: a broker without v3
    /// answers in v0's shape, whose first field, like every version's, is the error code.
    /// Returns the error for such a broker.
    pub(crate) fn refused(body: &[u8], at: &str) -> Option<Attempt> {
        (body.get(..2) == Some(&UNSUPPORTED_VERSION.to_be_bytes()[..])).then(|| {
            Attempt::Stop(TransportError::config(format!(
                "the broker at {at} does not support ApiVersions v3: Kafka 2.4 or newer is needed"
            )))
        })
    }
}

impl Exchange for ApiVersions {
    type Request = ApiVersionsRequest;
    type Output = Negotiated;
    const NAME: &'static str = "ApiVersions";
    const MAX_VERSION: i16 = VERSION;

    fn request(&self, _version: i16) -> ApiVersionsRequest {
        ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("kafka-coordination"))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")))
    }

    fn answer(
        &self,
        answer: ApiVersionsResponse,
        _version: i16,
        at: &str,
    ) -> Result<Negotiated, Attempt> {
        if answer.error_code != 0 {
            return Err(Attempt::Broken(format!(
                "ApiVersions at {at} failed with error {}",
                answer.error_code
            )));
        }
        let transaction_version = (answer.finalized_features_epoch >= 0).then(|| {
            answer
                .finalized_features
                .iter()
                .find(|f| f.name.as_str() == "transaction.version")
                .map_or(0, |f| f.max_version_level)
        });
        let broker_keys = answer.api_keys.iter().map(|k| k.api_key).collect();
        let mut versions = HashMap::new();
        for k in answer.api_keys {
            let ours = ApiKey::try_from(k.api_key)
                .ok()
                .map(|key| key.valid_versions());
            if let Some(ours) = ours {
                let max = k.max_version.min(ours.max);
                if max >= k.min_version.max(ours.min) {
                    versions.insert(k.api_key, max);
                }
            }
        }
        Ok(Negotiated {
            versions,
            broker_keys,
            transaction_version,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::api_versions_response::{ApiVersion, FinalizedFeatureKey};

    fn key(api: ApiKey, min: i16, max: i16) -> ApiVersion {
        ApiVersion::default()
            .with_api_key(api as i16)
            .with_min_version(min)
            .with_max_version(max)
    }

    #[test]
    fn the_request_names_this_client() {
        let req = ApiVersions.request(VERSION);
        assert_eq!(req.client_software_name.as_str(), "kafka-coordination");
        assert_eq!(
            req.client_software_version.as_str(),
            env!("CARGO_PKG_VERSION")
        );
    }

    /// Each API keeps the highest version both sides speak; one whose ranges do not meet, or
    /// that this client does not know, is not kept, but is listed among the broker's keys.
    #[test]
    fn versions_are_the_highest_both_sides_speak() {
        let produce_max = ApiKey::Produce.valid_versions().max;
        let answer = ApiVersionsResponse::default().with_api_keys(vec![
            key(ApiKey::Produce, 0, produce_max + 5),
            key(ApiKey::Fetch, 3, 4),
            key(ApiKey::Metadata, 900, 901),
            ApiVersion::default()
                .with_api_key(30_000)
                .with_max_version(1),
        ]);
        let n = ApiVersions.answer(answer, VERSION, "b:9092").ok().unwrap();
        assert_eq!(
            n.versions.get(&(ApiKey::Produce as i16)),
            Some(&produce_max)
        );
        assert_eq!(n.versions.get(&(ApiKey::Fetch as i16)), Some(&4));
        assert_eq!(n.versions.get(&(ApiKey::Metadata as i16)), None);
        assert_eq!(n.versions.len(), 2);
        assert_eq!(n.broker_keys.len(), 4);
        assert!(n.broker_keys.contains(&30_000));
    }

    /// The finalized `transaction.version`: its level when listed, 0 when finalized features
    /// are announced without it, unknown when none are.
    #[test]
    fn the_finalized_transaction_version_is_read() {
        let read = |features: Vec<FinalizedFeatureKey>, epoch: i64| {
            let answer = ApiVersionsResponse::default()
                .with_finalized_features_epoch(epoch)
                .with_finalized_features(features);
            ApiVersions
                .answer(answer, VERSION, "b:9092")
                .ok()
                .unwrap()
                .transaction_version
        };
        let feature = |name: &'static str, level: i16| {
            FinalizedFeatureKey::default()
                .with_name(StrBytes::from_static_str(name))
                .with_max_version_level(level)
        };
        assert_eq!(read(vec![feature("transaction.version", 2)], 12), Some(2));
        assert_eq!(read(vec![feature("metadata.version", 27)], 12), Some(0));
        assert_eq!(read(Vec::new(), -1), None);
    }

    #[test]
    fn an_error_drops_the_connection_and_an_old_broker_is_refused() {
        let answer = ApiVersionsResponse::default().with_error_code(UNSUPPORTED_VERSION);
        assert!(matches!(
            ApiVersions.answer(answer, VERSION, "b:9092"),
            Err(Attempt::Broken(why)) if why.contains("error 35")
        ));
        match ApiVersions::refused(&[0, 35, 0, 0], "b:9092") {
            Some(Attempt::Stop(e)) => assert!(e.to_string().contains("Kafka 2.4"), "{e}"),
            _ => panic!("a v0-shaped refusal must stop"),
        }
        assert!(ApiVersions::refused(&[0, 0, 0, 0], "b:9092").is_none());
        assert!(ApiVersions::refused(&[0], "b:9092").is_none());
    }
}
