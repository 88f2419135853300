// examples/examples/scheduler_blocking.rs: the same program on the blocking driver
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::{env, error::Error, sync::Arc, time::Duration};

use kafka_coordination::kafka::{KafkaConfig, KafkaTransport};
use kafka_coordination::{blocking, GuardedRecord, Options};
use signal_hook::consts::{SIGINT, SIGTERM};

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn Error>> {
    let member = env::args().nth(1).ok_or("needs a MEMBER argument")?;
    let stop = Arc::new(AtomicBool::new(false)); // set by SIGTERM and Ctrl-C
    signal_hook::flag::register(SIGTERM, stop.clone())?;
    signal_hook::flag::register(SIGINT, stop.clone())?;
    let bootstrap = env::var("KAFKA_BOOTSTRAP").unwrap_or_else(|_| "127.0.0.1:9092".into());
    let client = Arc::new(KafkaTransport::connect(KafkaConfig::new(bootstrap, 16))?);
    let mut candidacy = blocking::start(client, "scheduler", &member, Options::new())?;
    println!("{member} campaigns");
    let leader = loop {
        if stop.load(Relaxed) {
            candidacy.resign_blocking()?; // withdraws the registration
            println!("{member} withdrew");
            return Ok(());
        }
        match candidacy.elected_blocking_timeout(Duration::from_secs(1)) {
            Ok(leader) => break leader?,
            Err(waiting) => candidacy = waiting,
        }
    };
    let term = leader.term();
    println!("{member} leads: token {}, term {term}", leader.token());
    let mut outcome: Result<(), Box<dyn Error>> = Ok(());
    while !stop.load(Relaxed) {
        if leader.done_blocking_timeout(Duration::from_secs(1)) {
            outcome = Err(leader.err().map_or("term over".into(), Into::into));
            break;
        }
        let job = format!("a run of term {term}");
        let record = GuardedRecord::new("jobs", 0, None, Some(job.as_bytes()));
        if let Err(e) = leader.guarded_write_blocking(&[record]) {
            outcome = Err(e.into());
            break;
        }
    }
    leader.resign_blocking()?;
    println!("{member} resigned");
    outcome
}
