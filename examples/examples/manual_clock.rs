//! Unit-testing leader-only code with a `ManualClock` and the `MemoryBroker`: a scheduler that
//! runs jobs only while it leads, through renewal, takeover and fencing, in virtual time. The
//! harness lives in `examples/src/manual_clock.rs`; `examples/tests/manual_clock.rs` is the same
//! pattern as a `#[test]`.

fn main() {
    kafka_coordination_examples::main_with(
        "manual_clock",
        kafka_coordination_examples::manual_clock::run,
    );
}
