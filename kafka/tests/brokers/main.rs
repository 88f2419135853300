//! The Kafka client against real brokers, in one test binary: the transport's calls
//! (`transport`), secured listeners (`security`), the ACLs a member needs (`acls`), the whole
//! library end to end on the drivers (`leadership`), a broker older than the oldest supported
//! release (`old_broker`) and an address where nothing listens (`unreachable`).
//!
//! Start a broker with `scripts/kafka/start.sh` and export what it prints, or run
//! `scripts/kafka/with-broker.sh cargo test -p kafka-coordination-kafka --test brokers`
//! (`scripts/kafka-tests.sh` adds the three-broker test). Without `KAFKA_BOOTSTRAP` every test
//! that needs a broker says so loudly and returns.

mod acls;
mod leadership;
mod old_broker;
mod security;
mod transport;
mod unreachable;
