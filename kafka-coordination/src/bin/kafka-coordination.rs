//! `kafka-coordination`: the operator's tool for roles on a Kafka cluster (feature `cli`):
//! `describe`, `watch`, `roles`, `run` (a supervisor), `deregister`, `topic create|check|create-data`,
//! `fleet status|drain`.
//! Run `kafka-coordination --help`; docs/guide/operating.md describes each command.

#[path = "../cli/mod.rs"]
mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
