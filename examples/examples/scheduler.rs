// examples/examples/scheduler.rs: cargo run --example scheduler --features kafka-client -- MEMBER
use std::{env, error::Error, sync::Arc, time::Duration};

use kafka_coordination::kafka::{KafkaConfig, KafkaTransport};
use kafka_coordination::{tokio_driver, GuardedRecord, Options};
use tokio::signal::unix::{signal, SignalKind};

#[tokio::main]
async fn main() {
    if let Err(e) = run().await {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

async fn run() -> Result<(), Box<dyn Error>> {
    // Unique per role: a second live process with the same id stops with DuplicateMember.
    let member = env::args().nth(1).ok_or("needs a MEMBER argument")?;
    let mut sigterm = signal(SignalKind::terminate())?;
    let mut sigint = signal(SignalKind::interrupt())?; // Ctrl-C
    let stop = async move {
        tokio::select! { _ = sigterm.recv() => {}, _ = sigint.recv() => {} }
    };
    tokio::pin!(stop);
    let bootstrap = env::var("KAFKA_BOOTSTRAP").unwrap_or_else(|_| "127.0.0.1:9092".into());
    // 16: the partition count of __coordination_state. One client per process, for every role.
    let client = Arc::new(KafkaTransport::connect(KafkaConfig::new(bootstrap, 16))?);
    let candidacy = tokio_driver::start(client, "scheduler", &member, Options::new())?;
    println!("{member} campaigns");
    let cancel = candidacy.cancel_handle();
    let elected = candidacy.elected();
    tokio::pin!(elected);
    let leader = tokio::select! {
        leader = &mut elected => leader?,
        _ = &mut stop => {
            cancel.cancel(); // withdraws the registration (no effect if just elected)
            if let Ok(leader) = elected.await {
                leader.resign().await?;
            }
            println!("{member} withdrew");
            return Ok(());
        }
    };
    let (token, term) = (leader.token(), leader.term());
    println!("{member} leads: token {token}, term {term}");
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let outcome: Result<(), Box<dyn Error>> = loop {
        tokio::select! {
            _ = &mut stop => break Ok(()),
            _ = leader.done() => break Err(leader.err().map_or("term over".into(), Into::into)),
            _ = tick.tick() => {
                let job = format!("a run of term {term}");
                let record = GuardedRecord::new("jobs", 0, None, Some(job.as_bytes()));
                // Refused by the broker (Error::Fenced) once a newer leader exists.
                if let Err(e) = leader.guarded_write(&[record]).await {
                    break Err(e.into());
                }
            }
        }
    };
    // After a signal or an error alike: the lease and the registration are gone when this
    // returns, so a standby takes over at once instead of waiting out the lease.
    leader.resign().await?;
    println!("{member} resigned");
    outcome
}
