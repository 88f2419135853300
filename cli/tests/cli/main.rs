//! The `kafka-coordination` binary, run as a program (`CARGO_BIN_EXE_kafka-coordination`), in one
//! test binary: without a broker, each module checks argument and configuration errors; on a real
//! Apache Kafka broker (`KAFKA_BOOTSTRAP`, see `scripts/kafka/with-broker.sh`) it runs the
//! commands themselves. `cargo test -p kafka-coordination-cli -- MODULE::` runs one module.
//!
//! - `commands`: `topic create|check`, `describe`, `roles`, `watch`, `run` supervisors with a
//!   leader SIGKILLed, `deregister`;
//! - `data_topic`: `topic create-data`;
//! - `fleet`: `fleet status` and `fleet drain`;
//! - `fleet_acls`: a fleet's members, `fleet status` and `fleet drain` under the authorizer of
//!   the SASL_SSL listener, with exactly the ACLs docs/guide/deploying.md gives them;
//! - `deploying_guide`: docs/guide/deploying.md, its examples run on the secured listeners;
//! - `interop`: the tool and the library beside the Java member of `interop/java` (needs
//!   `scripts/interop.sh` first).

mod commands;
mod data_topic;
mod deploying_guide;
mod fleet;
mod fleet_acls;
mod interop;
