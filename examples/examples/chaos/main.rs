//! The chaos suite: member processes make guarded writes while an orchestrator kills, stops and
//! resigns their leaders (and, on three brokers, kills the brokers that lead their partitions
//! or coordinate their transactions); a checker then reads everything back read_committed and
//! proves, per role, that pairs never go back, that each pair's records come from one member
//! process, and that no acknowledged write is missing. It reports elections per failover,
//! failover overhead and the L1 bound.
//!
//! ```text
//! scripts/chaos.sh --failovers 200 [--seed S] [--brokers 1|3]     # starts its own broker(s)
//! chaos run --bootstrap HOST:PORT --failovers N --seed S --dir DIR  # against a running cluster
//! chaos check --bootstrap HOST:PORT --dir DIR                       # check a run again
//! ```
//!
//! `run` checks at the end and exits 1 on any violation, or when fewer than `--failovers`
//! failovers happened (within `--max-seconds`); `check` exits 1 on any violation. Safety
//! verdicts are exact; liveness figures are printed, never asserted. `run --self-test` then
//! forges a stale write (outside the fence) and a lost acknowledgement, and fails unless the
//! checker catches them. `run --postgres URL` has the members also write each job as a row
//! through the database fence, and the checker proves the table as it proves the topic.

mod check;
mod database;
mod format;
mod journal;
mod kafka;
mod liveness;
mod member;
mod netreport;
mod report;
mod run;

use std::path::PathBuf;
use std::time::Duration;

use kafka_coordination_examples::args::{parse, Parsed};

const USAGE: &str = "\
usage: chaos run   [--bootstrap HOST:PORT] [--brokers 1|3] [--failovers N (20)] [--seed S (1)]
                   [--dir DIR] [--members N (4)] [--roles N (2)] [--lease-ms (2000)]
                   [--renew-ms (500)] [--stagger-ms (300)] [--write-ms (50)] [--partitions (16)]
                   [--max-seconds S] [--kafka-scripts DIR] [--broker-kills N] [--self-test]
                   [--postgres URL] [--clock-faults N] [--net-faults N]
       chaos check [--bootstrap HOST:PORT] --dir DIR [--terms] [--postgres URL]
       chaos member ... (started by `run`)
The bootstrap defaults to $KAFKA_BOOTSTRAP. With --brokers 3, broker faults use
KAFKA_RUN_DIR and scripts/kafka/{stop-node,start-node}.sh. --broker-kills N (three brokers) makes
every other fault a broker kill, until N of them, and fails the run unless N happened and no
term ended in one with no fault aimed at its member. --postgres URL: each write is also a row
written through the database fence (kafka_coordination::postgres), checked in the table; check
takes the URL from --postgres or KC_POSTGRES_URL. --clock-faults N makes every other fault a
clock fault (libfaketime in the members: a leader ahead then killed, a standby behind, a leader
jumping ahead and back) until N of them; KC_LIBFAKETIME names the library if not found.
--net-faults N (three brokers in network namespaces, from scripts/chaos-net.sh): N network
faults instead of failovers (clock faults, when asked for, come between them).";

fn millis(p: &Parsed, name: &str, default: u64) -> Result<Duration, String> {
    Ok(Duration::from_millis(
        p.positive(name, default).map_err(|e| e.to_string())?,
    ))
}

fn bootstrap(p: &Parsed) -> Result<String, String> {
    p.value("--bootstrap")
        .map(str::to_owned)
        .or_else(|| std::env::var("KAFKA_BOOTSTRAP").ok())
        .filter(|b| !b.is_empty())
        .ok_or_else(|| "--bootstrap HOST:PORT (or KAFKA_BOOTSTRAP) is required".to_owned())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = match args.first().map(String::as_str) {
        Some("member") => member(&args[1..]),
        Some("run") => run(&args[1..]),
        Some("check") => check(&args[1..]),
        _ => Err(USAGE.to_owned()),
    };
    match code {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("chaos: {e}");
            std::process::exit(2);
        }
    }
}

fn member(args: &[String]) -> Result<i32, String> {
    let p = parse(
        args,
        &[
            "--member",
            "--instance",
            "--roles",
            "--bootstrap",
            "--state-topic",
            "--data-topic",
            "--partitions",
            "--journal",
            "--lease-ms",
            "--renew-ms",
            "--stagger-ms",
            "--write-ms",
            "--postgres",
            "--pg-fence",
            "--pg-rows",
        ],
        &[],
        USAGE,
    )
    .map_err(|e| e.to_string())?;
    let need = |name: &str| {
        p.value(name)
            .map(str::to_owned)
            .ok_or_else(|| format!("member: {name} is required"))
    };
    member::member_main(member::MemberArgs {
        member: need("--member")?,
        instance: p.positive("--instance", 1).map_err(|e| e.to_string())?,
        roles: need("--roles")?.split(',').map(str::to_owned).collect(),
        bootstrap: bootstrap(&p)?,
        state_topic: need("--state-topic")?,
        data_topic: need("--data-topic")?,
        partitions: p.positive("--partitions", 16).map_err(|e| e.to_string())? as i32,
        journal: PathBuf::from(need("--journal")?),
        lease: millis(&p, "--lease-ms", 2000)?,
        renew: millis(&p, "--renew-ms", 500)?,
        stagger: millis(&p, "--stagger-ms", 300)?,
        write_every: millis(&p, "--write-ms", 50)?,
        postgres: match p.value("--postgres") {
            None => None,
            Some(url) => Some((
                url.to_owned(),
                database::Tables {
                    fence: need("--pg-fence")?,
                    rows: need("--pg-rows")?,
                },
            )),
        },
    })?;
    Ok(0)
}

fn run(args: &[String]) -> Result<i32, String> {
    let p = parse(
        args,
        &[
            "--bootstrap",
            "--brokers",
            "--failovers",
            "--seed",
            "--dir",
            "--members",
            "--roles",
            "--lease-ms",
            "--renew-ms",
            "--stagger-ms",
            "--write-ms",
            "--partitions",
            "--max-seconds",
            "--kafka-scripts",
            "--broker-kills",
            "--postgres",
            "--clock-faults",
            "--net-faults",
        ],
        &["--self-test"],
        USAGE,
    )
    .map_err(|e| e.to_string())?;
    if p.help() {
        println!("{USAGE}");
        return Ok(0);
    }
    let num = |name: &str, default: u64| p.positive(name, default).map_err(|e| e.to_string());
    let brokers = num("--brokers", 1)? as usize;
    if brokers != 1 && brokers != 3 {
        return Err(format!("--brokers is 1 or 3, not {brokers}"));
    }
    let seed = match p.value("--seed") {
        None => 1,
        Some(s) => s
            .parse()
            .map_err(|_| format!("--seed needs a number, got `{s}`"))?,
    };
    let dir = p.value("--dir").map_or_else(
        || std::env::temp_dir().join(format!("chaos-{seed}-{}", std::process::id())),
        PathBuf::from,
    );
    let failovers = num("--failovers", 20)? as usize;
    let broker_kills = match p.value("--broker-kills") {
        None => 0,
        Some(_) => num("--broker-kills", 1)? as usize,
    };
    if broker_kills > 0 && brokers != 3 {
        return Err("--broker-kills needs --brokers 3".to_owned());
    }
    let args = run::RunArgs {
        broker_kills,
        bootstrap: bootstrap(&p)?,
        brokers,
        failovers,
        seed,
        dir: dir.clone(),
        members: num("--members", 4)? as usize,
        roles: num("--roles", 2)? as usize,
        lease: millis(&p, "--lease-ms", 2000)?,
        renew: millis(&p, "--renew-ms", 500)?,
        stagger: millis(&p, "--stagger-ms", 300)?,
        write_every: millis(&p, "--write-ms", 50)?,
        partitions: num("--partitions", 16)? as i32,
        max_seconds: p
            .value("--max-seconds")
            .map(|_| num("--max-seconds", 1))
            .transpose()?,
        postgres: p.value("--postgres").map(str::to_owned),
        clock_faults: match p.value("--clock-faults") {
            None => 0,
            Some(_) => num("--clock-faults", 1)? as usize,
        },
        net_faults: match p.value("--net-faults") {
            None => 0,
            Some(_) => num("--net-faults", 1)? as usize,
        },
        scripts: p.value("--kafka-scripts").map_or_else(
            || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/kafka"),
            PathBuf::from,
        ),
    };
    if args.members < 2 {
        return Err("--members must be at least 2 (a leader and a standby)".to_owned());
    }
    if args.net_faults > 0 && brokers != 3 {
        return Err("--net-faults needs --brokers 3".to_owned());
    }
    let net_faults = args.net_faults;
    let clock_faults = args.clock_faults;
    let bootstrap = args.bootstrap.clone();
    let outcome = run::run(args)?;
    println!(
        "\nchaos run: {} failovers and {} broker kills from {} faults in {:.0} s",
        outcome.failovers, outcome.broker_kills, outcome.faults, outcome.seconds
    );
    let postgres = p.value("--postgres");
    let verdict = report::check(&dir, &bootstrap, false, postgres)?;
    let progress = if net_faults > 0 {
        // The network faults alone: the clock faults between them do not count.
        (
            (outcome.faults as usize).saturating_sub(clock_faults),
            net_faults,
        )
    } else {
        (outcome.failovers, failovers)
    };
    let mut code = verdict_code(&verdict, Some(progress));
    if broker_kills > 0 {
        if outcome.broker_kills < broker_kills {
            println!(
                "chaos: FAILED: {} of {broker_kills} broker kills happened",
                outcome.broker_kills
            );
            code = 1;
        }
        if verdict.lost_to_brokers > 0 {
            println!(
                "chaos: FAILED: {} term(s) ended during the {} broker fault(s) with no fault \
                 aimed at their member",
                verdict.lost_to_brokers, verdict.broker_faults
            );
            code = 1;
        }
    }
    if code != 0 || !p.switch("--self-test") {
        return Ok(code);
    }
    println!(
        "\nchaos: self-test: replaying the first acknowledged write outside the fence and \
         journaling a write the log does not have; the check must now fail"
    );
    report::forge(&dir, &bootstrap, postgres)?;
    let forged = report::check(&dir, &bootstrap, false, postgres)?;
    if forged.violations == 0 {
        println!("chaos: FAILED: the checker found nothing wrong with forged logs");
        return Ok(1);
    }
    println!(
        "chaos: self-test OK: the checker caught the forgery ({} violations); the run itself \
         passed",
        forged.violations
    );
    Ok(0)
}

fn check(args: &[String]) -> Result<i32, String> {
    let p = parse(
        args,
        &["--bootstrap", "--dir", "--postgres"],
        &["--terms"],
        USAGE,
    )
    .map_err(|e| e.to_string())?;
    let dir = p
        .value("--dir")
        .map(PathBuf::from)
        .ok_or("check: --dir DIR is required")?;
    let postgres = p
        .value("--postgres")
        .map(str::to_owned)
        .or_else(|| std::env::var("KC_POSTGRES_URL").ok());
    let verdict = report::check(
        &dir,
        &bootstrap(&p)?,
        p.switch("--terms"),
        postgres.as_deref(),
    )?;
    Ok(verdict_code(&verdict, None))
}

/// 0 when safe (and, for a run, when it completed the failovers it was asked for: `progress`
/// is (completed, wanted)), 1 otherwise.
fn verdict_code(v: &report::Verdict, progress: Option<(usize, usize)>) -> i32 {
    let mut code = 0;
    if v.violations > 0 {
        println!("chaos: FAILED: {} safety violation(s)", v.violations);
        code = 1;
    }
    if let Some((done, wanted)) = progress.filter(|(done, wanted)| done < wanted) {
        println!(
            "chaos: FAILED: no progress: {done} of {wanted} failovers (network faults with \
             --net-faults) completed"
        );
        code = 1;
    }
    if code == 0 {
        println!("chaos: OK: no violation; {} failovers checked", v.failovers);
    }
    code
}
