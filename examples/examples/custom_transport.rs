//! A transport of your own: an in-process broker over a `HashMap` that implements only what
//! the transport seam requires, and an election run on it. The transport and the story live in
//! `examples/src/custom_transport.rs`; `examples/tests/examples_run.rs` runs the same story.

fn main() {
    kafka_coordination_examples::main_with(
        "custom_transport",
        kafka_coordination_examples::custom_transport::run,
    );
}
