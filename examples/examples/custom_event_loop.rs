//! The sans-IO `Candidate` driven by hand: one loop, two candidates, their I/O done directly on
//! the transport traits, sleeping until `poll_timeout`. The loop lives in
//! `examples/src/custom_event_loop.rs`.

fn main() {
    kafka_coordination_examples::main_with(
        "custom_event_loop",
        kafka_coordination_examples::custom_event_loop::run,
    );
}
