//! The summary: one row per figure, with its target and verdict, printed as a table; and the
//! numeric figures for a `--csv` data file.

use std::fmt;

/// A row's verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The target was met.
    Pass,
    /// A timing or balance target was not met (the run does not fail for it: the machine is
    /// shared and loaded).
    Missed,
    /// A safety target was not met: the run fails.
    Fail,
    /// A figure with no target.
    Info,
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Verdict::Pass => "PASS",
            Verdict::Missed => "MISSED",
            Verdict::Fail => "FAIL",
            Verdict::Info => "-",
        })
    }
}

/// One row of the summary.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub scenario: String,
    pub what: String,
    pub figure: String,
    pub target: String,
    pub verdict: Verdict,
}

/// Every row and every numeric figure of a run.
#[derive(Clone, Debug, Default)]
pub struct Report {
    rows: Vec<Row>,
    /// (scenario, metric with its unit, value).
    metrics: Vec<(String, String, f64)>,
}

impl Report {
    fn push(&mut self, scenario: &str, what: &str, figure: String, target: &str, v: Verdict) {
        let row = Row {
            scenario: scenario.to_owned(),
            what: what.to_owned(),
            figure,
            target: target.to_owned(),
            verdict: v,
        };
        println!(
            "  {}: {} = {} [{}] {}",
            row.scenario, row.what, row.figure, row.target, v
        );
        self.rows.push(row);
    }

    /// A timing or balance target: PASS when `met`, else MISSED.
    pub fn target(&mut self, scenario: &str, what: &str, figure: String, target: &str, met: bool) {
        let v = if met { Verdict::Pass } else { Verdict::Missed };
        self.push(scenario, what, figure, target, v);
    }

    /// A safety target: PASS when `met`, else FAIL (the run exits non-zero).
    pub fn safety(&mut self, scenario: &str, what: &str, figure: String, target: &str, met: bool) {
        let v = if met { Verdict::Pass } else { Verdict::Fail };
        self.push(scenario, what, figure, target, v);
    }

    /// A figure without a target.
    pub fn info(&mut self, scenario: &str, what: &str, figure: String) {
        self.push(scenario, what, figure, "", Verdict::Info);
    }

    /// A numeric figure for the data file.
    pub fn metric(&mut self, scenario: &str, metric: &str, value: f64) {
        self.metrics
            .push((scenario.to_owned(), metric.to_owned(), value));
    }

    /// The numeric figures: (scenario, metric, value).
    pub fn metrics(&self) -> &[(String, String, f64)] {
        &self.metrics
    }

    /// Whether a safety target failed.
    pub fn safety_failed(&self) -> bool {
        self.rows.iter().any(|r| r.verdict == Verdict::Fail)
    }

    /// How many rows have verdict `v`.
    pub fn count(&self, v: Verdict) -> usize {
        self.rows.iter().filter(|r| r.verdict == v).count()
    }

    /// The table, one row a line, columns aligned.
    pub fn table(&self) -> String {
        let head = Row {
            scenario: "scenario".into(),
            what: "figure".into(),
            figure: "value".into(),
            target: "target".into(),
            verdict: Verdict::Info,
        };
        let all: Vec<&Row> = std::iter::once(&head).chain(&self.rows).collect();
        let width = |f: fn(&Row) -> &str| all.iter().map(|r| f(r).chars().count()).max();
        let w = [
            width(|r| &r.scenario).unwrap_or(0),
            width(|r| &r.what).unwrap_or(0),
            width(|r| &r.figure).unwrap_or(0),
            width(|r| &r.target).unwrap_or(0),
        ];
        let mut out = String::new();
        for (i, r) in all.iter().enumerate() {
            let verdict = if i == 0 {
                "verdict".to_owned()
            } else {
                r.verdict.to_string()
            };
            let line = format!(
                "{:<a$}  {:<b$}  {:<c$}  {:<d$}  {verdict}",
                r.scenario,
                r.what,
                r.figure,
                r.target,
                a = w[0],
                b = w[1],
                c = w[2],
                d = w[3],
            );
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// `ms` as `1234 ms`.
pub fn ms(ms: i64) -> String {
    format!("{ms} ms")
}

/// Milliseconds since `start` as seconds with one decimal (`12.3 s`), or `never`.
pub fn since(start: i64, at: Option<i64>) -> String {
    match at {
        Some(at) => format!("{:.1} s", (at - start) as f64 / 1000.0),
        None => "never".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_and_the_table() {
        let mut r = Report::default();
        r.target("settle", "shares", "m1 10".into(), "±2 %", true);
        r.target("kill", "take-over p99", ms(4200), "<= 4000 ms", false);
        r.info("kill", "take-overs", "12".into());
        assert!(!r.safety_failed());
        r.safety("all", "overlapping terms", "1".into(), "0", false);
        assert!(r.safety_failed());
        assert_eq!(
            (
                r.count(Verdict::Pass),
                r.count(Verdict::Missed),
                r.count(Verdict::Fail)
            ),
            (1, 1, 1)
        );
        let t = r.table();
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 5);
        assert!(lines[0].starts_with("scenario  figure"), "{t}");
        assert!(lines[2].ends_with("MISSED"), "{t}");
        assert!(lines[3].ends_with('-'), "{t}");
        // The columns line up: every verdict starts at the same place.
        let column = |line: &str, word: &str| line[..line.find(word).unwrap()].chars().count();
        assert_eq!(column(lines[1], "PASS"), column(lines[4], "FAIL"), "{t}");
        assert_eq!(since(1000, Some(3500)), "2.5 s");
        assert_eq!(since(1000, None), "never");
    }
}
