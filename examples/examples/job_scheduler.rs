//! A job scheduler that records its job runs in PostgreSQL through the database fence and in
//! Kafka through guarded writes (see `kafka_coordination_examples::job_scheduler`).
//!
//! ```text
//! scripts/kafka/with-broker.sh scripts/postgres/with-postgres.sh \
//!     cargo run --example job_scheduler --features postgres -- --create-topics --runs 5
//! ```

fn main() {
    kafka_coordination_examples::main_with(
        "job_scheduler",
        kafka_coordination_examples::job_scheduler::run,
    );
}
