//! Reading the librdkafka-style properties: a value with empty treated as unset, a PEM file,
//! and the configuration error that names what to set.

use crate::config::KafkaConfig;
use kafka_coordination_transport::error::TransportError;

pub(super) fn config_err(message: String) -> TransportError {
    TransportError::config(message)
}

/// A property's value, with empty values treated as unset.
pub(super) fn prop<'a>(config: &'a KafkaConfig, key: &str) -> Option<&'a str> {
    config
        .property(key)
        .map(str::trim)
        .filter(|v| !v.is_empty())
}

/// Reads a PEM file, or says which property names it and why it cannot be read.
pub(super) fn read_pem(property: &str, path: &str) -> Result<Vec<u8>, TransportError> {
    std::fs::read(path).map_err(|e| {
        config_err(format!(
            "{property}={path} cannot be read: {e}; set {property} to a readable PEM file"
        ))
    })
}
