//! `cargo run --example tokio_service`: a tokio service that does its role's work only while it
//! leads, with guarded writes awaited on the runtime, and hands over cleanly on shutdown.
//!
//! Two instances of the service share one process here (in production: one per process, each
//! with one client). The story:
//! 1. `svc-a` is elected; `svc-b` waits;
//! 2. `svc-a` does three units of work, each one guarded write (`leadership.guarded_write(..)
//!    .await`), while `tokio::select!` watches `leadership.done()`;
//! 3. `svc-a` shuts down: `leadership.resign().await` supersedes its pair, clears the lease and
//!    deregisters before it returns, so `svc-b` takes over at once (no lease to wait out);
//! 4. `svc-b` works, and its writes carry a larger term; `svc-a`'s pair is refused.
//!
//! Nothing in the story waits for a lease to run out, so it takes milliseconds.

use std::sync::Arc;

use kafka_coordination::leadership::Leadership;
use kafka_coordination::memory::MemoryBroker;
use kafka_coordination::{Clock, GuardedRecord, ManualClock, Options, SystemClock};

use crate::args::{ensure, parse, Failure};
use crate::timeline::Timeline;

/// The command-line help.
pub const USAGE: &str = "\
usage: cargo run --example tokio_service [-- --virtual-time]

Two instances of a tokio service, one role, on the embedded MemoryBroker.
  --virtual-time   run on a manual clock (nothing here waits for time to pass)";

const ROLE: &str = "report-generator";
const TOPIC: &str = "reports";

/// The role's work: one guarded write per unit, while the term lasts.
async fn work(
    name: &str,
    leadership: &Leadership,
    units: u32,
    out: &Timeline,
) -> Result<u32, Failure> {
    let mut done = 0;
    for unit in 1..=units {
        let value = format!("{name} unit {unit}");
        let records = [GuardedRecord {
            topic: TOPIC,
            partition: 0,
            key: Some(name.as_bytes()),
            value: Some(value.as_bytes()),
            headers: &[],
        }];
        tokio::select! {
            // The term can end at any moment: stop the work then.
            () = leadership.done() => {
                out.event(name, format!("the term ended: {:?}", leadership.err()));
                return Ok(done);
            }
            written = leadership.guarded_write(&records) => {
                let offsets = written.map_err(|e| Failure::Failed(format!("{name}: {e}")))?;
                out.event(
                    name,
                    format!("unit {unit}: guarded write at offset {} (term {})", offsets[0], leadership.term()),
                );
                done += 1;
            }
        }
    }
    Ok(done)
}

/// Runs the example with command-line `args`, printing to `out`.
pub fn run(args: &[String], out: &Timeline) -> Result<(), Failure> {
    let p = parse(args, &[], &["--virtual-time"], USAGE)?;
    if p.help() {
        out.note(USAGE);
        return Ok(());
    }
    let clock: Arc<dyn Clock> = if p.switch("--virtual-time") {
        Arc::new(ManualClock::default())
    } else {
        Arc::new(SystemClock)
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Failure::Failed(format!("tokio runtime: {e}")))?;
    runtime.block_on(scenario(clock, out))
}

async fn scenario(clock: Arc<dyn Clock>, out: &Timeline) -> Result<(), Failure> {
    let broker = MemoryBroker::new(16, clock.clone());
    let options = Options::new()
        .clock(clock.clone())
        .lease_duration(std::time::Duration::from_secs(3))
        .renew_interval(std::time::Duration::from_secs(1));
    out.note("tokio_service: two instances of one tokio service, role `report-generator`");
    let failed = |e: kafka_coordination::Error| Failure::Failed(e.to_string());

    // 1. Both instances start campaigning; svc-a is first.
    let a = kafka_coordination::tokio_driver::acquire_leadership(
        broker.transport("svc-a"),
        ROLE,
        "svc-a",
        options.clone(),
    )
    .await
    .map_err(failed)?;
    out.event(
        "svc-a",
        format!("elected: token {}, term {}", a.token(), a.term()),
    );
    let b =
        kafka_coordination::tokio_driver::start(broker.transport("svc-b"), ROLE, "svc-b", options)
            .map_err(failed)?;

    // 2. svc-a works.
    let did = work("svc-a", &a, 3, out).await?;
    ensure(did == 3, || format!("svc-a did {did} units"))?;

    // 3. svc-a shuts down: resign before main returns.
    let resigned = a.resign().await;
    ensure(resigned.is_ok(), || format!("svc-a's resign: {resigned:?}"))?;
    out.event(
        "svc-a",
        "resigned: pair superseded, lease cleared, registration withdrawn",
    );
    let b = b.elected().await.map_err(failed)?;
    out.event(
        "svc-b",
        format!("elected at once: token {}, term {}", b.token(), b.term()),
    );
    ensure(b.term() > a.term(), || "the term did not grow".to_owned())?;

    // 4. svc-b works; svc-a's old pair is refused.
    let did = work("svc-b", &b, 2, out).await?;
    ensure(did == 2, || format!("svc-b did {did} units"))?;
    let stale = a
        .guarded_write(&[GuardedRecord {
            topic: TOPIC,
            partition: 0,
            key: None,
            value: Some(b"late"),
            headers: &[],
        }])
        .await;
    ensure(stale.is_err(), || {
        "svc-a's old pair was accepted".to_owned()
    })?;
    out.event("svc-a", "a write with the resigned pair: REFUSED");
    let written = broker.topic_records(TOPIC, 0).len();
    ensure(written == 5, || format!("{written} records in `{TOPIC}`"))?;
    let resigned = b.resign().await;
    ensure(resigned.is_ok(), || format!("svc-b's resign: {resigned:?}"))?;
    out.note(format!(
        "tokio_service: OK, {written} guarded writes in `{TOPIC}`, terms {} then {}",
        a.term(),
        b.term()
    ));
    Ok(())
}
