//! What a Kafka cluster can carry: the brokers' cost of one lease renewal, measured in a steady
//! state of `many_roles`, and from it the roles a cluster of a given size renews in time.
//!
//! The model is linear: the brokers' CPU is their idle cost (replication polls, heartbeats) plus
//! the renewals per second times the CPU one renewal costs the whole cluster (its transaction on
//! the coordinator, the record and the commit marker on every replica of the state partition).
//! Requests follow the same rule without an idle part. `scripts/capacity.sh` measures the cost
//! in one run, predicts a second run of another size from it, and checks the prediction
//! ([`check`]); [`table`] projects roles per cluster size from the same cost.
//!
//! The projection assumes what the measurement cannot show on one machine: that a cluster of
//! more cores spreads the same work over them (enough state-topic and transaction-log
//! partitions, their leaders spread over the brokers), at the same replication factor.

use std::fmt::Write as _;

/// The prefix of the line `many_roles` prints at the end of its steady state.
pub const PREFIX: &str = "CAPACITY";

/// The share of the renewals its roles need that a run must commit to count as within
/// capacity.
pub const KEPT_UP: f64 = 0.9;

/// One steady state: what `many_roles` measured, as its `CAPACITY` line says.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// Roles led.
    pub roles: u64,
    /// The renew interval, ms.
    pub renew_ms: u64,
    /// The steady state's length, s.
    pub seconds: f64,
    /// Renewals committed in it.
    pub renewals: u64,
    /// CPU seconds every broker of the cluster used in it, summed.
    pub broker_cpu_s: f64,
    /// Requests the process sent in it.
    pub requests: u64,
    /// Brokers measured.
    pub brokers: u32,
    /// The state topic's replication factor.
    pub replication: u32,
}

impl Sample {
    /// The line `many_roles` prints; [`Sample::parse`] reads it back.
    pub fn line(&self) -> String {
        format!(
            "{PREFIX} roles={} renew_ms={} seconds={:.3} renewals={} broker_cpu_s={:.3} \
             requests={} brokers={} replication={}",
            self.roles,
            self.renew_ms,
            self.seconds,
            self.renewals,
            self.broker_cpu_s,
            self.requests,
            self.brokers,
            self.replication
        )
    }

    /// Reads a `CAPACITY` line; the error names the field that is missing or wrong.
    pub fn parse(line: &str) -> Result<Sample, String> {
        let rest = line
            .trim()
            .strip_prefix(PREFIX)
            .ok_or_else(|| format!("not a {PREFIX} line: {line:?}"))?;
        let fields: Vec<(&str, &str)> = rest
            .split_whitespace()
            .map(|kv| {
                kv.split_once('=')
                    .ok_or_else(|| format!("{PREFIX} line: `{kv}` is not name=value"))
            })
            .collect::<Result<_, _>>()?;
        let get = |name: &str| {
            fields
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| *v)
                .ok_or_else(|| format!("{PREFIX} line: no {name}= in {line:?}"))
        };
        let int = |name: &str| -> Result<u64, String> {
            let v = get(name)?;
            v.parse()
                .map_err(|_| format!("{PREFIX} line: {name}={v} is not a whole number"))
        };
        let real = |name: &str| -> Result<f64, String> {
            let v = get(name)?;
            match v.parse::<f64>() {
                Ok(x) if x.is_finite() && x >= 0.0 => Ok(x),
                _ => Err(format!(
                    "{PREFIX} line: {name}={v} is not a number of zero or more"
                )),
            }
        };
        let small = |name: &str| -> Result<u32, String> {
            u32::try_from(int(name)?).map_err(|_| format!("{PREFIX} line: {name} is too large"))
        };
        Ok(Sample {
            roles: int("roles")?,
            renew_ms: int("renew_ms")?,
            seconds: real("seconds")?,
            renewals: int("renewals")?,
            broker_cpu_s: real("broker_cpu_s")?,
            requests: int("requests")?,
            brokers: small("brokers")?,
            replication: small("replication")?,
        })
    }

    /// The first `CAPACITY` line of a program's output.
    pub fn find(output: &str) -> Result<Sample, String> {
        output
            .lines()
            .find(|l| l.trim_start().starts_with(PREFIX))
            .ok_or_else(|| format!("no {PREFIX} line in the output"))
            .and_then(Sample::parse)
    }

    /// Renewals per second.
    pub fn renewal_rate(&self) -> f64 {
        self.renewals as f64 / self.seconds
    }

    /// Renewals per second the roles need: one per role per renew interval.
    pub fn demand(&self) -> f64 {
        self.roles as f64 * 1000.0 / self.renew_ms.max(1) as f64
    }

    /// Whether the run renewed at least [`KEPT_UP`] of what its roles needed: a run that did
    /// not measured the cluster's ceiling, not the cost at its demand.
    pub fn kept_up(&self) -> bool {
        self.renewal_rate() >= KEPT_UP * self.demand()
    }

    /// The brokers' CPU, in cores.
    pub fn broker_cores(&self) -> f64 {
        self.broker_cpu_s / self.seconds
    }

    /// Requests per second.
    pub fn request_rate(&self) -> f64 {
        self.requests as f64 / self.seconds
    }
}

/// The cost of one renewal to a cluster, from one [`Sample`] and the cluster's idle CPU.
#[derive(Clone, Debug, PartialEq)]
pub struct Cost {
    /// The brokers' CPU with no role, in cores (summed over the cluster).
    pub idle_cores: f64,
    /// CPU milliseconds one renewal costs the cluster (every broker summed).
    pub cpu_ms_per_renewal: f64,
    /// Requests one renewal costs (reads of the host included).
    pub requests_per_renewal: f64,
    /// The sample's brokers and replication factor: the cost holds for this replication.
    pub brokers: u32,
    /// See [`Cost::brokers`].
    pub replication: u32,
}

impl Cost {
    /// The cost that `sample` shows above `idle_cores`. An error when the sample cannot give
    /// one: no steady state, no renewal, or brokers that used less than their idle CPU.
    pub fn of(sample: &Sample, idle_cores: f64) -> Result<Cost, String> {
        if sample.seconds.is_nan() || sample.seconds <= 0.0 {
            return Err("the sample has no steady state (seconds=0)".to_owned());
        }
        if sample.renewals == 0 {
            return Err("the sample committed no renewal: nothing to divide by".to_owned());
        }
        if !(idle_cores.is_finite() && idle_cores >= 0.0) {
            return Err(format!("idle cores {idle_cores} is not zero or more"));
        }
        if !sample.kept_up() {
            return Err(format!(
                "the run was over capacity: it renewed {:.0} of the {:.0} leases a second its \
                 {} roles need (the cluster's ceiling on this machine, not the cost of a \
                 renewal); measure with fewer roles or a longer renew interval",
                sample.renewal_rate(),
                sample.demand(),
                sample.roles
            ));
        }
        let busy = sample.broker_cores() - idle_cores;
        if busy <= 0.0 {
            return Err(format!(
                "the brokers used {:.3} cores with {} roles, not more than idle ({idle_cores:.3}): \
                 the run measured no cost",
                sample.broker_cores(),
                sample.roles
            ));
        }
        Ok(Cost {
            idle_cores,
            cpu_ms_per_renewal: busy * 1000.0 / sample.renewal_rate(),
            requests_per_renewal: sample.requests as f64 / sample.renewals as f64,
            brokers: sample.brokers,
            replication: sample.replication,
        })
    }

    /// The brokers' CPU, in cores, with `roles` renewed every `renew_s` seconds.
    pub fn broker_cores(&self, roles: f64, renew_s: f64) -> f64 {
        self.idle_cores + roles / renew_s * self.cpu_ms_per_renewal / 1000.0
    }

    /// Requests per second with `roles` renewed every `renew_s` seconds.
    pub fn requests_per_s(&self, roles: f64, renew_s: f64) -> f64 {
        roles / renew_s * self.requests_per_renewal
    }

    /// The roles a cluster of `cores` renews every `renew_s` seconds using at most
    /// `utilization` of them (the rest is headroom: a failover's takeovers and a broker's
    /// restart come on top of the renewals), idle cost of this many brokers included.
    pub fn roles(&self, brokers: u32, cores: f64, utilization: f64, renew_s: f64) -> f64 {
        let idle = self.idle_cores / f64::from(self.brokers.max(1)) * f64::from(brokers);
        let spare = cores * utilization - idle;
        if spare <= 0.0 {
            return 0.0;
        }
        spare * 1000.0 / self.cpu_ms_per_renewal * renew_s
    }
}

/// A prediction next to what a run measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Check {
    /// Predicted and measured broker cores.
    pub cores: (f64, f64),
    /// Predicted and measured requests per second.
    pub requests: (f64, f64),
    /// The largest relative error allowed, for each.
    pub tolerance: f64,
    /// Whether the run renewed what its roles needed ([`Sample::kept_up`]).
    pub kept_up: bool,
}

impl Check {
    /// |predicted − measured| / measured, for the cores and for the requests.
    pub fn errors(&self) -> (f64, f64) {
        let rel = |(p, m): (f64, f64)| {
            if m > 0.0 {
                (p - m).abs() / m
            } else {
                f64::INFINITY
            }
        };
        (rel(self.cores), rel(self.requests))
    }

    /// Whether the run kept up and both predictions are within the tolerance.
    pub fn holds(&self) -> bool {
        let (c, r) = self.errors();
        self.kept_up && c <= self.tolerance && r <= self.tolerance
    }
}

/// The prediction of `cost` for the roles and renew interval of `run`, beside what `run`
/// measured. A run that did not keep up ([`Sample::kept_up`]) fails the check: the model says
/// what its roles need, and the run shows the cluster could not give it.
pub fn check(cost: &Cost, run: &Sample, tolerance: f64) -> Check {
    let renew_s = run.renew_ms as f64 / 1000.0;
    let roles = run.roles as f64;
    Check {
        cores: (cost.broker_cores(roles, renew_s), run.broker_cores()),
        requests: (cost.requests_per_s(roles, renew_s), run.request_rate()),
        tolerance,
        kept_up: run.kept_up(),
    }
}

/// The clusters the projection is printed for: (brokers, cores each).
pub const CLUSTERS: [(u32, u32); 5] = [(3, 2), (3, 4), (3, 8), (6, 8), (12, 8)];

/// The renew intervals the projection is printed for, s (the library's default is 10 s).
pub const RENEW_S: [f64; 3] = [3.0, 10.0, 20.0];

/// The projection as a Markdown table: roles per cluster (at `utilization` of its cores) and
/// renew interval, for the cost's replication factor.
pub fn table(cost: &Cost, utilization: f64) -> String {
    let mut out = String::new();
    let _ = write!(out, "| cluster (brokers x cores) |");
    for r in RENEW_S {
        let _ = write!(out, " renew {r:.0} s |");
    }
    let _ = writeln!(out);
    let _ = write!(out, "|---|");
    for _ in RENEW_S {
        let _ = write!(out, "---|");
    }
    let _ = writeln!(out);
    for (brokers, each) in CLUSTERS {
        let _ = write!(out, "| {brokers} x {each} |");
        for r in RENEW_S {
            let roles = cost.roles(brokers, f64::from(brokers * each), utilization, r);
            let _ = write!(out, " {} |", round(roles));
        }
        let _ = writeln!(out);
    }
    out
}

/// Two significant figures, with thousands separated: a projection is no more precise.
fn round(x: f64) -> String {
    if x < 1.0 {
        return "0".to_owned();
    }
    let digits = x.log10().floor() as i32;
    let step = 10f64.powi((digits - 1).max(0));
    let n = ((x / step).round() * step) as u64;
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(roles: u64, renewals: u64, cpu: f64, requests: u64) -> Sample {
        Sample {
            roles,
            renew_ms: 10_000,
            seconds: 100.0,
            renewals,
            broker_cpu_s: cpu,
            requests,
            brokers: 3,
            replication: 3,
        }
    }

    #[test]
    fn a_line_reads_back_as_the_sample_it_was_written_from() {
        let s = sample(1000, 10_000, 61.5, 30_000);
        assert_eq!(Sample::parse(&s.line()), Ok(s.clone()));
        let out = format!("some output\n  {}\nmore", s.line());
        assert_eq!(Sample::find(&out), Ok(s));
    }

    #[test]
    fn a_bad_line_names_what_is_wrong() {
        assert!(Sample::parse("renewals=3")
            .unwrap_err()
            .contains("not a CAPACITY line"));
        let line = sample(1, 1, 1.0, 1).line();
        let missing = line.replace(" requests=1", "");
        assert!(Sample::parse(&missing)
            .unwrap_err()
            .contains("no requests="));
        let bad = line.replace("renewals=1", "renewals=many");
        assert!(Sample::parse(&bad).unwrap_err().contains("renewals=many"));
        let negative = line.replace("broker_cpu_s=1.000", "broker_cpu_s=-2");
        assert!(Sample::parse(&negative)
            .unwrap_err()
            .contains("broker_cpu_s=-2"));
        let loose = line.replace("brokers=3", "brokers");
        assert!(Sample::parse(&loose)
            .unwrap_err()
            .contains("`brokers` is not name=value"));
        assert!(Sample::find("nothing here")
            .unwrap_err()
            .contains("no CAPACITY line"));
    }

    #[test]
    fn the_cost_is_what_the_brokers_used_above_idle_per_renewal() {
        // 100 renewals a second; 0.6 cores above an idle 0.3: 6 ms a renewal.
        let cost = Cost::of(&sample(1000, 10_000, 90.0, 30_000), 0.3).unwrap();
        assert!((cost.cpu_ms_per_renewal - 6.0).abs() < 1e-9, "{cost:?}");
        assert!((cost.requests_per_renewal - 3.0).abs() < 1e-9);
        // Twice the roles: twice the busy part, the idle part unchanged.
        assert!((cost.broker_cores(2000.0, 10.0) - 1.5).abs() < 1e-9);
        assert!((cost.requests_per_s(2000.0, 10.0) - 600.0).abs() < 1e-9);
    }

    #[test]
    fn a_run_over_capacity_gives_no_cost_and_fails_a_check() {
        // 1,000 roles need 100 renewals a second; 44 a second is the cluster's ceiling.
        let over = sample(1000, 4_400, 90.0, 13_200);
        assert!(!over.kept_up());
        let e = Cost::of(&over, 0.3).unwrap_err();
        assert!(
            e.contains("over capacity") && e.contains("44 of the 100"),
            "{e}"
        );
        let cost = Cost::of(&sample(500, 5_000, 60.0, 15_000), 0.3).unwrap();
        let c = check(&cost, &over, 10.0);
        assert!(!c.kept_up && !c.holds(), "{c:?}");
    }

    #[test]
    fn a_sample_that_shows_no_cost_is_refused_by_name() {
        assert!(Cost::of(&sample(0, 0, 90.0, 1), 0.3)
            .unwrap_err()
            .contains("no renewal"));
        assert!(Cost::of(&sample(10, 100, 20.0, 1), 0.3)
            .unwrap_err()
            .contains("not more than idle"));
        let mut s = sample(10, 100, 90.0, 1);
        s.seconds = 0.0;
        assert!(Cost::of(&s, 0.3).unwrap_err().contains("no steady state"));
        assert!(Cost::of(&sample(10, 100, 90.0, 1), f64::NAN)
            .unwrap_err()
            .contains("idle cores"));
    }

    #[test]
    fn roles_per_cluster_leave_the_idle_cost_and_the_headroom_aside() {
        let cost = Cost::of(&sample(1000, 10_000, 90.0, 30_000), 0.3).unwrap();
        // 3 brokers x 2 cores at 50 %: 3 cores, 0.3 idle, 2.7 for renewals of 6 ms each =
        // 450 renewals a second = 4,500 roles at a 10 s renew interval.
        assert!((cost.roles(3, 6.0, 0.5, 10.0) - 4500.0).abs() < 1e-6);
        // Six brokers double the idle cost too.
        assert!((cost.roles(6, 12.0, 0.5, 10.0) - 9000.0).abs() < 1e-6);
        // A cluster whose headroom is all idle cost carries nothing.
        assert_eq!(cost.roles(3, 0.5, 0.5, 10.0), 0.0);
    }

    #[test]
    fn a_check_holds_within_its_tolerance_only() {
        let cost = Cost::of(&sample(1000, 10_000, 90.0, 30_000), 0.3).unwrap();
        // A run of 2,000 roles that used 1.6 cores and 620 requests a second.
        let run = sample(2000, 20_000, 160.0, 62_000);
        let c = check(&cost, &run, 0.10);
        assert!((c.cores.0 - 1.5).abs() < 1e-9 && (c.cores.1 - 1.6).abs() < 1e-9);
        assert!(c.holds(), "{c:?}");
        let far = sample(2000, 20_000, 250.0, 62_000);
        assert!(!check(&cost, &far, 0.10).holds());
    }

    #[test]
    fn the_table_rounds_to_two_figures() {
        assert_eq!(round(4500.0), "4,500");
        assert_eq!(round(123_456.0), "120,000");
        assert_eq!(round(0.4), "0");
        assert_eq!(round(87.0), "87");
        let cost = Cost::of(&sample(1000, 10_000, 90.0, 30_000), 0.3).unwrap();
        let t = table(&cost, 0.5);
        assert!(t.contains("| 3 x 2 | 1,300 | 4,500 | 9,000 |"), "{t}");
    }
}
