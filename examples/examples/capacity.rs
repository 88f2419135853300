//! The capacity model checked against a run, and the projection it gives: reads the output of
//! two steady states of `many_roles` (their `CAPACITY` lines), takes the cost of a renewal from
//! the first, predicts the second's broker CPU and requests from it, and prints the roles per
//! cluster size that cost allows. `scripts/capacity.sh` runs it; see
//! [`kafka_coordination_examples::capacity`] for the model.
//!
//! ```text
//! capacity --idle-cores 0.21 [--tolerance 0.25] [--utilization 0.5] CALIBRATION.log CHECK.log
//! ```
//!
//! `--idle-cores`: the brokers' CPU with no role (summed, cores). `--tolerance`: the largest
//! relative error of a prediction that still holds (0.25). `--utilization`: the share of a
//! cluster's cores the projection fills (0.5: the rest is headroom for failovers).
//! Exit code 0 when both predictions hold, 1 when one does not, 2 on bad input.

use kafka_coordination_examples::capacity::{check, table, Cost, Sample};

fn main() {
    match run(std::env::args().skip(1).collect()) {
        Ok(true) => {}
        Ok(false) => std::process::exit(1),
        Err(e) => {
            eprintln!("capacity: {e}");
            std::process::exit(2);
        }
    }
}

fn run(args: Vec<String>) -> Result<bool, String> {
    let (mut idle, mut tolerance, mut utilization) = (None, 0.25, 0.5);
    let mut files = Vec::new();
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        let mut number = |flag: &str, lo: f64, hi: f64| -> Result<f64, String> {
            let v = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
            match v.parse::<f64>() {
                Ok(x) if x >= lo && x <= hi => Ok(x),
                _ => Err(format!("{flag}: {v} is not a number from {lo} to {hi}")),
            }
        };
        match a.as_str() {
            "--idle-cores" => idle = Some(number("--idle-cores", 0.0, 1024.0)?),
            "--tolerance" => tolerance = number("--tolerance", 0.0, 10.0)?,
            "--utilization" => utilization = number("--utilization", 0.01, 1.0)?,
            f if f.starts_with("--") => return Err(format!("unknown flag {f}")),
            _ => files.push(a),
        }
    }
    let idle = idle.ok_or("--idle-cores is required (the brokers' CPU with no role)")?;
    let [calibration, checked] = <[String; 2]>::try_from(files)
        .map_err(|f| format!("two files (calibration, check), not {}", f.len()))?;
    let read = |path: &str| -> Result<Sample, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
        Sample::find(&text).map_err(|e| format!("{path}: {e}"))
    };
    let (a, b) = (read(&calibration)?, read(&checked)?);
    let cost = Cost::of(&a, idle).map_err(|e| format!("{calibration}: {e}"))?;
    println!(
        "cost: {:.2} ms of broker CPU and {:.2} requests per renewal, idle {:.2} cores \
         ({} brokers, replication {}; from {} roles renewed every {} ms: {:.0} renewals/s, \
         {:.2} broker cores)",
        cost.cpu_ms_per_renewal,
        cost.requests_per_renewal,
        cost.idle_cores,
        cost.brokers,
        cost.replication,
        a.roles,
        a.renew_ms,
        a.renewal_rate(),
        a.broker_cores()
    );
    let c = check(&cost, &b, tolerance);
    println!(
        "check: {} roles renewed every {} ms: broker cores predicted {:.2}, measured {:.2} \
         ({:+.0} %); requests/s predicted {:.0}, measured {:.0} ({:+.0} %); tolerance {:.0} %: {}",
        b.roles,
        b.renew_ms,
        c.cores.0,
        c.cores.1,
        (c.cores.0 / c.cores.1 - 1.0) * 100.0,
        c.requests.0,
        c.requests.1,
        (c.requests.0 / c.requests.1 - 1.0) * 100.0,
        tolerance * 100.0,
        if c.holds() { "holds" } else { "DOES NOT HOLD" }
    );
    if !c.kept_up {
        println!(
            "check: that run was over capacity: it renewed {:.0} of the {:.0} leases a second \
             its roles need (p50 renewal lag in its log)",
            b.renewal_rate(),
            b.demand()
        );
    }
    println!(
        "\nroles a cluster renews in time at {:.0} % of its cores (replication {}):\n",
        utilization * 100.0,
        cost.replication
    );
    print!("{}", table(&cost, utilization));
    Ok(c.holds())
}
