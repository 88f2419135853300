//! A singleton consumer with exactly-once output on rdkafka (see
//! `kafka_coordination_examples::singleton_consumer`).
//!
//! ```text
//! # one member of the service (run two or three; they share --role, --group, the topics):
//! cargo run --example singleton_consumer --features kafka -- member --member a --bootstrap HOST:PORT \
//!     --state-topic S --role R --group G --input IN --output OUT
//! # the exactly-once run: feeds N records, runs members, kills and pauses leaders, checks:
//! cargo run --example singleton_consumer --features kafka -- bench --bootstrap HOST:PORT \
//!     --records 20000 --members 3 --kills 6 --stops 4
//! ```

use std::process::Command;

use kafka_coordination_examples::args::Failure;
use kafka_coordination_examples::singleton_consumer::{exactly_once, member, Settings};

fn value<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}

fn number(args: &[String], name: &str, default: u64) -> Result<u64, Failure> {
    value(args, name).map_or(Ok(default), |v| {
        v.parse()
            .map_err(|_| Failure::Usage(format!("{name}: not a number: {v}")))
    })
}

fn run(args: &[String], _: &kafka_coordination_examples::Timeline) -> Result<(), Failure> {
    let (command, rest) = args
        .split_first()
        .ok_or_else(|| Failure::Usage("member | bench".into()))?;
    let bootstrap = value(rest, "--bootstrap")
        .map(str::to_owned)
        .or_else(|| std::env::var("KAFKA_BOOTSTRAP").ok())
        .ok_or_else(|| Failure::Usage("--bootstrap HOST:PORT (or KAFKA_BOOTSTRAP)".into()))?;
    let settings = Settings::parse(rest, Settings::fresh(&bootstrap, "consumer-bench"))?;
    match command.as_str() {
        "member" => {
            let name = value(rest, "--member").unwrap_or("member");
            member(&settings, name)
        }
        "bench" => {
            let exe = std::env::current_exe().map_err(|e| e.to_string())?;
            let spawn = |name: &str| {
                let mut c = Command::new(&exe);
                c.arg("member")
                    .args(settings.to_args())
                    .args(["--member", name]);
                c
            };
            let report = exactly_once(
                &settings,
                number(rest, "--records", 2_000)?,
                number(rest, "--members", 3)? as usize,
                number(rest, "--kills", 3)? as u32,
                number(rest, "--stops", 2)? as u32,
                &spawn,
            )?;
            println!("{report}");
            if report.duplicates + report.gaps + report.out_of_order > 0 {
                return Err(format!("not exactly once: {report}").into());
            }
            println!("exactly once: OK");
            Ok(())
        }
        other => Err(Failure::Usage(format!(
            "unknown command {other}: member | bench"
        ))),
    }
}

fn main() {
    kafka_coordination_examples::main_with("singleton_consumer", run);
}
