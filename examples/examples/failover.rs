//! Leader election, a leader's death, takeover, fencing and a resign hand-over, as a timeline.
//! Run `cargo run --example failover -- --help` for the options; the scenario lives in
//! `examples/src/failover.rs`.

fn main() {
    kafka_coordination_examples::main_with("failover", kafka_coordination_examples::failover::run);
}
