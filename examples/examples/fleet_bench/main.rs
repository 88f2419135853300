//! Fleet balancing benchmark: member processes of the `fleet_member` example lead the same
//! roles; this program starts, kills, drains and upgrades them, reads their event streams and
//! prints, per scenario, how the roles moved and whether each target was met.
//!
//! ```text
//! scripts/fleet-bench.sh [--roles N | --quick]     # three brokers, topics, a release build
//! fleet_bench --bootstrap HOST:PORT --roles 3000 --members 3 --scenarios all \
//!     --state-topic T --fleet-topic F
//! cargo test -p kafka-coordination-examples --example fleet_bench   # the parser, the figures
//! ```
//!
//! Each member prints one line per event on its stdout (see `events.rs`): `READY`, `LEAD`,
//! `END`, `DRAINED` and, every second, `STATS`. Every figure is computed from the stamps on
//! those lines (the members run on this machine, on its clock) and from the instants this
//! program sent its signals. The scenarios are described in `scenarios.rs`.
//!
//! Verdicts: PASS, MISSED (a timing or balance target not met: reported, the run does not
//! fail for it), FAIL (a safety target: two processes' overlapping terms of a role, the older
//! one not fenced later). Exit status: 0, or 1 when a safety target failed or the run could not
//! complete (a member exited by itself), 2 on bad arguments or a missing member binary.
//!
//! Every member's stdout is kept in `<dir>/<member>#<k>.events`, its stderr in
//! `<dir>/<member>#<k>.stderr` (`k`: which start of the member).

mod analysis;
mod events;
mod leases;
mod ledger;
mod members;
mod report;
mod scenarios;

use std::path::PathBuf;
use std::time::Duration;

use kafka_coordination_examples::args::{parse, Parsed};
use kafka_coordination_examples::procfs::MachineCpu;
use kafka_coordination_examples::stats::{Csv, Row};

use crate::leases::LeaseReader;
use crate::ledger::Ledger;
use crate::members::{now_ms, Members};
use crate::scenarios::{Bench, Config, Scenarios};

const USAGE: &str = "\
usage: fleet_bench [--member-bin PATH] [--bootstrap HOST:PORT,...] [--roles N (3000)]
                   [--members N (3)] [--scenarios settle,kill,restart,scale,upgrade|all (all)]
                   [--prefix P] [--fleet NAME] [--state-topic T] [--partitions N] [--fleet-topic T]
                   [--lease-ms MS (10000)] [--renew-ms MS (3000)] [--stagger-ms MS (500)]
                   [--weight W] [--max-in-motion K] [--max-in-flight N] [--policy P (balance)]
                   [--upgrade-policy P (prefer-newest)] [--upgrade-version V (2)]
                   [--settle-timeout-s S (600)] [--quiet-ms MS]
                   [--tolerance PCT (2)] [--kill-tolerance PCT (5)] [--handover-ms MS (50)]
                   [--dir DIR] [--csv PATH] [--cli PATH]
The member binary: --member-bin, else $FLEET_MEMBER, else fleet_member next to this program.
The bootstrap (passed to the members) defaults to $KAFKA_BOOTSTRAP. Members get --member,
--version, --policy, --roles, --prefix, --lease, --renew, --stagger and, when given here,
--bootstrap, --state-topic, --partitions (the state topic's), --fleet-topic, --fleet,
--weight, --max-in-motion, --max-in-flight.
--settle-timeout-s bounds every wait; settled = every role led and no LEAD or END for
--quiet-ms (default: 5000, or two renew intervals + 1000 when that is longer, since a member
is handed roles only once it has been seen live for a renew interval). --tolerance: the shares' target (percent of an equal share); --kill-tolerance:
the survivors' after a kill. --handover-ms: one hand-over's time, the base of the vacancy
target (+ 50 ms). --dir: where the members' output goes (default: a temporary directory).
--csv: append the numeric figures to a data file (stats::CSV_HEADER). --cli: the
kafka-coordination binary; with it, the kill scenario reads each of the killed member's
leases from the state topic and times each takeover from that lease's deadline.";

fn num(p: &Parsed, name: &str, default: u64) -> Result<u64, String> {
    p.positive(name, default).map_err(|e| e.to_string())
}

fn percent(p: &Parsed, name: &str, default: f64) -> Result<f64, String> {
    match p.value(name) {
        None => Ok(default / 100.0),
        Some(v) => match v.parse::<f64>() {
            Ok(x) if x > 0.0 && x < 100.0 => Ok(x / 100.0),
            _ => Err(format!(
                "{name} needs a percentage above 0 and below 100, got `{v}`"
            )),
        },
    }
}

fn policy(p: &Parsed, name: &str, default: &str) -> Result<String, String> {
    let v = p.value(name).unwrap_or(default);
    match v {
        "balance" | "prefer-newest" | "prefer-oldest" => Ok(v.to_owned()),
        other => Err(format!(
            "{name} is balance, prefer-newest or prefer-oldest, not `{other}`"
        )),
    }
}

/// The member binary: `--member-bin`, `$FLEET_MEMBER`, or `fleet_member` beside this program.
fn member_bin(p: &Parsed) -> Result<PathBuf, String> {
    let path = match p
        .value("--member-bin")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("FLEET_MEMBER").map(PathBuf::from))
    {
        Some(path) => path,
        None => std::env::current_exe()
            .map_err(|e| format!("cannot find this program's path: {e}"))?
            .with_file_name("fleet_member"),
    };
    if !path.is_file() {
        return Err(format!(
            "no member binary at {} (build the fleet_member example, or pass --member-bin \
             PATH or set FLEET_MEMBER)",
            path.display()
        ));
    }
    Ok(path)
}

struct Run {
    cfg: Config,
    bin: PathBuf,
    common: Vec<String>,
    dir: PathBuf,
    csv: Option<String>,
    prefix: String,
    renew_ms: u64,
}

fn parse_args(args: &[String]) -> Result<Option<Run>, String> {
    let p = parse(
        args,
        &[
            "--member-bin",
            "--bootstrap",
            "--roles",
            "--members",
            "--scenarios",
            "--prefix",
            "--fleet",
            "--state-topic",
            "--fleet-topic",
            "--partitions",
            "--lease-ms",
            "--renew-ms",
            "--stagger-ms",
            "--weight",
            "--max-in-motion",
            "--max-in-flight",
            "--policy",
            "--upgrade-policy",
            "--upgrade-version",
            "--settle-timeout-s",
            "--quiet-ms",
            "--tolerance",
            "--kill-tolerance",
            "--handover-ms",
            "--dir",
            "--csv",
            "--cli",
        ],
        &[],
        USAGE,
    )
    .map_err(|e| e.to_string())?;
    if p.help() {
        println!("{USAGE}");
        return Ok(None);
    }
    let roles = num(&p, "--roles", 3000)? as usize;
    let members = num(&p, "--members", 3)? as usize;
    if members < 2 {
        return Err("--members needs at least 2 (a kill leaves survivors)".into());
    }
    let scenarios = Scenarios::parse(p.value("--scenarios").unwrap_or("all"))?;
    let lease_ms = num(&p, "--lease-ms", 10_000)?;
    let renew_ms = num(&p, "--renew-ms", 3_000)?;
    let stagger_ms = num(&p, "--stagger-ms", 500)?;
    if renew_ms >= lease_ms {
        return Err(format!(
            "--renew-ms ({renew_ms}) must be below --lease-ms ({lease_ms})"
        ));
    }
    let stamp = now_ms() / 1000;
    let prefix = p
        .value("--prefix")
        .map_or_else(|| format!("fb{stamp}"), str::to_owned);
    let fleet = p
        .value("--fleet")
        .map_or_else(|| format!("fleet-bench-{stamp}"), str::to_owned);
    let mut common: Vec<String> = vec![
        "--roles".into(),
        roles.to_string(),
        "--prefix".into(),
        prefix.clone(),
        "--fleet".into(),
        fleet,
        "--lease".into(),
        lease_ms.to_string(),
        "--renew".into(),
        renew_ms.to_string(),
        "--stagger".into(),
        stagger_ms.to_string(),
    ];
    let bootstrap = p
        .value("--bootstrap")
        .map(str::to_owned)
        .or_else(|| std::env::var("KAFKA_BOOTSTRAP").ok())
        .filter(|b| !b.is_empty());
    if let Some(b) = &bootstrap {
        common.extend(["--bootstrap".into(), b.clone()]);
    }
    for flag in ["--state-topic", "--fleet-topic"] {
        if let Some(v) = p.value(flag) {
            common.extend([flag.to_owned(), v.to_owned()]);
        }
    }
    if p.value("--partitions").is_some() {
        common.extend([
            "--partitions".into(),
            num(&p, "--partitions", 16)?.to_string(),
        ]);
    }
    if p.value("--weight").is_some() {
        common.extend(["--weight".into(), num(&p, "--weight", 1)?.to_string()]);
    }
    for flag in ["--max-in-motion", "--max-in-flight"] {
        if p.value(flag).is_some() {
            common.extend([flag.to_owned(), num(&p, flag, 1)?.to_string()]);
        }
    }
    let upgrade_version = num(&p, "--upgrade-version", 2)?;
    let upgrade_version = u32::try_from(upgrade_version)
        .ok()
        .filter(|&v| v != 1)
        .ok_or_else(|| {
            format!(
                "--upgrade-version must differ from 1 and fit in 32 bits, not {upgrade_version}"
            )
        })?;
    let dir = p.value("--dir").map_or_else(
        || std::env::temp_dir().join(format!("fleet-bench-{}-{}", stamp, std::process::id())),
        PathBuf::from,
    );
    let leases = p.value("--cli").map(|cli| {
        let mut connection = Vec::new();
        if let Some(b) = &bootstrap {
            connection.extend(["--bootstrap-servers".to_owned(), b.clone()]);
        }
        if let Some(t) = p.value("--state-topic") {
            connection.extend(["--topic".to_owned(), t.to_owned()]);
        }
        if let Some(n) = p.value("--partitions") {
            connection.extend(["--partitions".to_owned(), n.to_owned()]);
        }
        LeaseReader {
            cli: PathBuf::from(cli),
            connection,
        }
    });
    let cfg = Config {
        roles,
        members,
        scenarios,
        lease_ms: lease_ms as i64,
        renew_ms: renew_ms as i64,
        policy: policy(&p, "--policy", "balance")?,
        upgrade_policy: policy(&p, "--upgrade-policy", "prefer-newest")?,
        upgrade_version,
        settle_timeout: Duration::from_secs(num(&p, "--settle-timeout-s", 600)?),
        // A member is handed roles once the others have read its heartbeat (up to a renew
        // interval) and it has been live for a renew interval: a quieter spell than that is
        // not yet the end of a move.
        quiet_ms: num(&p, "--quiet-ms", 5_000.max(2 * renew_ms + 1_000))? as i64,
        tolerance: percent(&p, "--tolerance", 2.0)?,
        kill_tolerance: percent(&p, "--kill-tolerance", 5.0)?,
        handover_ms: num(&p, "--handover-ms", 50)? as i64,
        leases,
    };
    Ok(Some(Run {
        bin: member_bin(&p)?,
        cfg,
        common,
        dir,
        csv: p.value("--csv").map(str::to_owned),
        prefix,
        renew_ms,
    }))
}

fn scenarios(bench: &mut Bench, s: Scenarios) -> Result<(), String> {
    bench.settle_scenario()?;
    if s.kill {
        let killed = bench.kill_scenario()?;
        if s.restart {
            bench.restart_scenario(&killed)?;
        }
    }
    if s.scale {
        bench.scale_scenario()?;
    }
    if s.upgrade {
        bench.upgrade_scenario()?;
    }
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let run = match parse_args(&args) {
        Ok(Some(run)) => run,
        Ok(None) => return,
        Err(e) => {
            eprintln!("fleet_bench: {e}");
            std::process::exit(2);
        }
    };
    let roles: Vec<String> = (0..run.cfg.roles)
        .map(|i| format!("{}-{i}", run.prefix))
        .collect();
    let members = match Members::new(run.bin.clone(), run.common.clone(), run.dir.clone()) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("fleet_bench: {e}");
            std::process::exit(1);
        }
    };
    println!(
        "fleet_bench: {} roles ({}-0 ..), {} members, scenarios {:?}; lease {} ms, renew {} ms; \
         policy {}, upgrade to v{} with {}; member binary {}; output in {}",
        run.cfg.roles,
        run.prefix,
        run.cfg.members,
        run.cfg.scenarios,
        run.cfg.lease_ms,
        run.renew_ms,
        run.cfg.policy,
        run.cfg.upgrade_version,
        run.cfg.upgrade_policy,
        run.bin.display(),
        members.dir().display()
    );
    println!("member flags: {}", run.common.join(" "));
    let machine = MachineCpu::now();
    // Members drain on SIGTERM at the end; those still running after this are SIGKILLed.
    let grace = run
        .cfg
        .settle_timeout
        .min(Duration::from_millis(4 * run.cfg.lease_ms as u64).max(Duration::from_secs(60)));
    let lease_ms = run.cfg.lease_ms;
    let (roles_n, scen) = (run.cfg.roles, run.cfg.scenarios);
    let mut bench = Bench::new(run.cfg.clone(), Ledger::new(roles), members);
    let stopped = scenarios(&mut bench, scen).err();
    if let Some(e) = &stopped {
        println!("fleet_bench: the run stopped early: {e}");
    }
    bench.finish(grace);
    bench.report.info(
        "all",
        "machine CPU over the run",
        MachineCpu::now().since(&machine),
    );
    println!("\nsummary ({roles_n} roles, lease {lease_ms} ms):\n");
    print!("{}", bench.report.table());
    let r = &bench.report;
    println!(
        "\n{} PASS, {} MISSED, {} FAIL{}",
        r.count(report::Verdict::Pass),
        r.count(report::Verdict::Missed),
        r.count(report::Verdict::Fail),
        match &stopped {
            Some(e) => format!("; the run stopped early: {e}"),
            None => String::new(),
        }
    );
    if let Some(path) = &run.csv {
        let written = Csv::open(path).and_then(|csv| {
            csv.append(r.metrics().iter().map(|(scenario, metric, value)| Row {
                bench: "fleet_bench",
                driver: scenario,
                roles: roles_n,
                lease_ms: u128::try_from(lease_ms).unwrap_or(0),
                renew_ms: u128::from(run.renew_ms),
                metric,
                value: *value,
            }))
        });
        if let Err(e) = written {
            eprintln!("fleet_bench: writing {path}: {e}");
        }
    }
    if r.safety_failed() || stopped.is_some() {
        std::process::exit(1);
    }
}
