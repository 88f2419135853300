//! A tokio service that works only while it leads, with guarded writes awaited on the runtime,
//! and hands over on shutdown. The scenario lives in `examples/src/tokio_service.rs`.

fn main() {
    kafka_coordination_examples::main_with(
        "tokio_service",
        kafka_coordination_examples::tokio_service::run,
    );
}
