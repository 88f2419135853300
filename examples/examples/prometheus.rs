//! Members of one role with their metrics on `/metrics` (Prometheus text) and a leader liveness
//! check on `/healthz`. The program lives in `examples/src/prometheus.rs`.

fn main() {
    kafka_coordination_examples::main_with(
        "prometheus",
        kafka_coordination_examples::prometheus::run,
    );
}
