//! Guarded-write latency through the tokio handle, on a real broker:
//! `KAFKA_BOOTSTRAP=HOST:PORT cargo run --release --example guarded_write_bench --features kafka-client -- [WRITES] [CONCURRENT]`.
//!
//! One member leads a role, then awaits WRITES guarded writes of one record each, one after
//! the other, then WRITES more from CONCURRENT tasks at once, and prints the median and the
//! 99th percentile of each write's latency (from the call to its answer) for both.

use std::error::Error;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_coordination::kafka::{KafkaConfig, KafkaTransport};
use kafka_coordination::leadership::Leadership;
use kafka_coordination::{tokio_driver, GuardedRecord, Options};

const TOPIC: &str = "guarded-write-bench";

#[tokio::main]
async fn main() {
    if let Err(e) = run().await {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

async fn run() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let writes: usize = args.next().map_or(Ok(1000), |a| a.parse())?;
    let concurrent: usize = args.next().map_or(Ok(16), |a| a.parse())?;
    if writes == 0 || concurrent == 0 {
        return Err("WRITES and CONCURRENT must be at least 1".into());
    }
    let bootstrap = std::env::var("KAFKA_BOOTSTRAP").unwrap_or_else(|_| "127.0.0.1:9092".into());
    let client = tokio::task::spawn_blocking(move || -> Result<_, Box<dyn Error + Send + Sync>> {
        let client = KafkaTransport::new(KafkaConfig::new(bootstrap, 16))?;
        client.create_topic(1, None)?;
        client.create_data_topic(TOPIC, 1, 1, None)?;
        Ok(Arc::new(client))
    })
    .await?
    .map_err(|e| e.to_string())?;
    let role = format!("bench-{}", std::process::id());
    let candidacy = tokio_driver::start(client, &role, "bench", Options::new())?;
    let leader = Arc::new(candidacy.elected().await?);
    // Warm-up: connections, the partition's leader, the producer's first transaction.
    for _ in 0..20 {
        write(&leader).await?;
    }
    let mut one_by_one = Vec::with_capacity(writes);
    for _ in 0..writes {
        one_by_one.push(write(&leader).await?);
    }
    report("one at a time", one_by_one, None);
    let started = Instant::now();
    let tasks: Vec<_> = (0..concurrent)
        .map(|t| {
            let leader = Arc::clone(&leader);
            let n = writes / concurrent + usize::from(t < writes % concurrent);
            tokio::spawn(async move {
                let mut took = Vec::with_capacity(n);
                for _ in 0..n {
                    took.push(write(&leader).await.map_err(|e| e.to_string())?);
                }
                Ok::<_, String>(took)
            })
        })
        .collect();
    let mut together = Vec::with_capacity(writes);
    for task in tasks {
        together.extend(task.await??);
    }
    report(
        &format!("{concurrent} at once"),
        together,
        Some(started.elapsed()),
    );
    leader.resign().await?;
    Ok(())
}

/// One guarded write of one record; how long it took.
async fn write(leader: &Leadership) -> Result<Duration, Box<dyn Error>> {
    let record = GuardedRecord::new(TOPIC, 0, None, Some(b"x"));
    let started = Instant::now();
    leader.guarded_write(&[record]).await?;
    Ok(started.elapsed())
}

fn report(what: &str, mut took: Vec<Duration>, wall: Option<Duration>) {
    took.sort();
    let at = |q: f64| took[((took.len() - 1) as f64 * q).round() as usize];
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    print!(
        "{what}: {} writes, median {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        took.len(),
        ms(at(0.5)),
        ms(at(0.99)),
        ms(at(1.0)),
    );
    match wall {
        Some(wall) => println!(", {:.0} writes/s", took.len() as f64 / wall.as_secs_f64()),
        None => println!(),
    }
}
