//! Small helpers for the figures the benchmarks print, and for the data files they write
//! (`--csv PATH`) that `scripts/plots.sh` renders.

use std::io::Write;
use std::path::{Path, PathBuf};

/// The value at quantile `q` (0.0 to 1.0, nearest rank) of the ascending `sorted`; 0 when it
/// is empty.
pub fn quantile(sorted: &[i64], q: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// The header of every benchmark data file: one measured value a row ("long" form), so one
/// reader serves every benchmark.
pub const CSV_HEADER: &str = "bench,driver,roles,lease_ms,renew_ms,metric,value";

/// One row of a benchmark data file.
#[derive(Clone, Debug, PartialEq)]
pub struct Row<'a> {
    /// The benchmark and the scenario (`failover_bench`, `host_bench`, `host_bench_burst`, ...).
    pub bench: &'a str,
    /// The driver or mode measured (`host`, `tokio`, `kill`, ...).
    pub driver: &'a str,
    /// How many roles the run held.
    pub roles: usize,
    /// The lease duration of the run, in milliseconds.
    pub lease_ms: u128,
    /// The renew interval of the run, in milliseconds.
    pub renew_ms: u128,
    /// What the value is, with its unit (`failover_overhead_ms`, `elected_s`, ...).
    pub metric: &'a str,
    /// The value.
    pub value: f64,
}

/// A benchmark data file that rows are appended to (several processes of one run may append
/// to the same file: each row is one `write` of a whole line). The header is written when the
/// file is empty.
#[derive(Clone, Debug)]
pub struct Csv {
    path: PathBuf,
}

impl Csv {
    /// The file at `path`, created with its header if it does not exist or is empty.
    pub fn open(path: impl AsRef<Path>) -> std::io::Result<Csv> {
        let path = path.as_ref().to_path_buf();
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)?;
        if file.metadata()?.len() == 0 {
            file.write_all(format!("{CSV_HEADER}\n").as_bytes())?;
        }
        Ok(Csv { path })
    }

    /// Appends `rows`, each as one line.
    pub fn append<'a>(&self, rows: impl IntoIterator<Item = Row<'a>>) -> std::io::Result<()> {
        let mut file = std::fs::OpenOptions::new().append(true).open(&self.path)?;
        for row in rows {
            file.write_all(line(&row).as_bytes())?;
        }
        Ok(())
    }
}

fn line(row: &Row<'_>) -> String {
    let field = |s: &str| {
        if s.contains([',', '"', '\n']) {
            format!("\"{}\"", s.replace('"', "\"\""))
        } else {
            s.to_owned()
        }
    };
    format!(
        "{},{},{},{},{},{},{}\n",
        field(row.bench),
        field(row.driver),
        row.roles,
        row.lease_ms,
        row.renew_ms,
        field(row.metric),
        row.value
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_take_the_nearest_rank() {
        assert_eq!(quantile(&[], 0.99), 0);
        assert_eq!(quantile(&[7], 0.5), 7);
        let v: Vec<i64> = (1..=100).collect();
        assert_eq!(quantile(&v, 0.5), 51);
        assert_eq!(quantile(&v, 0.99), 99);
        assert_eq!(quantile(&v, 1.0), 100);
        assert_eq!(quantile(&v, 0.0), 1);
    }

    #[test]
    fn a_data_file_has_one_header_and_one_line_per_row() {
        let path = std::env::temp_dir().join(format!("stats-csv-{}.csv", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let row = |metric, value| Row {
            bench: "host_bench",
            driver: "host, tokio",
            roles: 10,
            lease_ms: 10_000,
            renew_ms: 3_000,
            metric,
            value,
        };
        Csv::open(&path)
            .unwrap()
            .append([row("elected_s", 0.25)])
            .unwrap();
        // A second process of the same run opens the file again: no second header.
        Csv::open(&path)
            .unwrap()
            .append([row("lag_p99_ms", 1.0)])
            .unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(
            text,
            format!(
                "{CSV_HEADER}\nhost_bench,\"host, tokio\",10,10000,3000,elected_s,0.25\n\
                 host_bench,\"host, tokio\",10,10000,3000,lag_p99_ms,1\n"
            )
        );
    }
}
