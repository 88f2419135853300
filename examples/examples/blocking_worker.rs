//! A worker thread that works only while it leads and stops when fenced; a deposed worker's
//! writes are refused by token. The scenario lives in `examples/src/blocking_worker.rs`.

fn main() {
    kafka_coordination_examples::main_with(
        "blocking_worker",
        kafka_coordination_examples::blocking_worker::run,
    );
}
