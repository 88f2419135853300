//! The operator's kit (`ops/`): every metric and label that the alert rules and the Grafana
//! dashboard name is one the library exports, the rules have what Prometheus needs, the
//! dashboard is valid JSON, and the guide lists every alert. Prometheus's own `promtool` checks
//! the rules and runs their unit tests (`ops/alerts_test.yml`, a total outage among them); it
//! is found in `PROMTOOL`, `.tools/bin` (scripts/ensure-promtool.sh builds it there) or on
//! `PATH`. Without it that test skips loudly, or fails when `CI` is set.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use kafka_coordination::metrics;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn repo_file(path: &str) -> String {
    let file = repo_root().join(path);
    std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
}

/// The series names the library records, with the suffixes Prometheus adds to a histogram.
fn exported() -> BTreeSet<String> {
    let counters_and_gauges = [
        metrics::IS_LEADER,
        metrics::ELECTIONS,
        metrics::FENCED,
        metrics::RESIGNS,
        metrics::RENEW_FAILURES,
        metrics::CANDIDACY_ENDS,
    ];
    let histograms = [metrics::RENEW_SECONDS, metrics::ACQUIRE_SECONDS];
    let mut names: BTreeSet<String> = counters_and_gauges.iter().map(|s| s.to_string()).collect();
    for h in histograms {
        for suffix in ["_bucket", "_sum", "_count"] {
            names.insert(format!("{h}{suffix}"));
        }
    }
    names
}

/// Every `kafka_coordination_*` identifier in `text`.
fn metric_names(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(i) = rest.find("kafka_coordination_") {
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        out.insert(tail[..end].to_owned());
        rest = &tail[end..];
    }
    out
}

/// The labels `text` groups or matches by: `by (..)`, `on (..)`, `{label=..}` and
/// `$labels.label`.
fn label_names(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for keyword in ["by (", "on (", "without ("] {
        for part in text.split(keyword).skip(1) {
            let list = part.split(')').next().unwrap_or("");
            out.extend(
                list.split(',')
                    .map(|l| l.trim().to_owned())
                    .filter(|l| !l.is_empty()),
            );
        }
    }
    for part in text.split("kafka_coordination_").skip(1) {
        let name_end = part
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(part.len());
        if let Some(matchers) = part[name_end..].strip_prefix('{') {
            for m in matchers.split('}').next().unwrap_or("").split(',') {
                let label = m.split(['=', '!']).next().unwrap_or("").trim();
                if !label.is_empty() {
                    out.insert(label.to_owned());
                }
            }
        }
    }
    for part in text.split("$labels.").skip(1) {
        let end = part
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(part.len());
        out.insert(part[..end].to_owned());
    }
    out
}

fn known_labels() -> BTreeSet<String> {
    [
        metrics::ROLE_LABEL,
        metrics::MEMBER_LABEL,
        metrics::REASON_LABEL,
        "le",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn assert_all_known(what: &str, text: &str) {
    let names = metric_names(text);
    assert!(!names.is_empty(), "{what} names no metric");
    let unknown: Vec<_> = names.difference(&exported()).cloned().collect();
    assert!(
        unknown.is_empty(),
        "{what} names metrics the library does not export: {unknown:?}"
    );
    let labels = label_names(text);
    let unknown: Vec<_> = labels.difference(&known_labels()).cloned().collect();
    assert!(
        unknown.is_empty(),
        "{what} uses labels the library does not set: {unknown:?}"
    );
}

#[test]
fn the_alert_rules_name_only_exported_metrics_and_have_what_prometheus_needs() {
    let rules = repo_file("ops/alerts.yml");
    assert_all_known("ops/alerts.yml", &rules);
    let alerts: Vec<&str> = rules.split("- alert: ").skip(1).collect();
    assert!(
        alerts.len() >= 4,
        "the four alerts the kit promises, at least"
    );
    let guide = repo_file("docs/guide/operating.md");
    for alert in alerts {
        let name = alert.lines().next().unwrap_or("").trim();
        for field in ["expr:", "labels:", "severity:", "summary:"] {
            assert!(alert.contains(field), "alert {name} has no {field}");
        }
        assert!(
            guide.contains(&format!("`{name}`")),
            "the guide's operating page does not list alert {name}"
        );
    }
    // The promised cases: leaderless role, failing renewals, renewal lag, churning terms.
    for metric in [
        metrics::IS_LEADER,
        metrics::RENEW_FAILURES,
        metrics::RENEW_SECONDS,
        metrics::ELECTIONS,
    ] {
        assert!(rules.contains(metric), "no alert reads {metric}");
    }
}

#[test]
fn the_dashboard_is_json_and_names_only_exported_metrics() {
    let text = repo_file("ops/grafana-dashboard.json");
    let dashboard: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    let panels = dashboard["panels"].as_array().expect("panels");
    assert!(!panels.is_empty());
    let mut exprs = String::new();
    for panel in panels {
        for target in panel["targets"].as_array().expect("targets") {
            exprs.push_str(target["expr"].as_str().expect("expr"));
            exprs.push('\n');
        }
    }
    assert_all_known("ops/grafana-dashboard.json", &exprs);
}

#[test]
fn the_checks_catch_an_unknown_metric_and_an_unknown_label() {
    let known = exported();
    let names = metric_names("rate(kafka_coordination_renew_failure_total[5m])");
    assert!(!names.is_subset(&known));
    let labels = label_names("sum by (role, pod) (kafka_coordination_is_leader{memberr=\"a\"})");
    assert_eq!(
        labels
            .difference(&known_labels())
            .cloned()
            .collect::<Vec<_>>(),
        ["memberr", "pod"]
    );
    assert!(metric_names("kafka_coordination_renew_seconds_bucket{le=\"1\"}").is_subset(&known));
}

/// The alert names of `ops/alerts.yml`, in order.
fn alert_names(rules: &str) -> Vec<String> {
    rules
        .split("- alert: ")
        .skip(1)
        .map(|a| a.lines().next().unwrap_or("").trim().to_owned())
        .collect()
}

/// One test group of `ops/alerts_test.yml`: its input series as (series, values), and its
/// checks as (alert name, whether it is expected to fire).
struct RuleTest {
    series: Vec<(String, String)>,
    checks: Vec<(String, bool)>,
}

/// A quoted value after `key` on `line`, if the line holds that key.
fn quoted_after<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let rest = line.trim().strip_prefix("- ").unwrap_or(line.trim());
    let value = rest.strip_prefix(key)?.trim();
    Some(value.trim_matches('\'').trim_matches('"'))
}

fn rule_tests(text: &str) -> Vec<RuleTest> {
    let mut tests = Vec::new();
    for group in text.split("\n  - name: ").skip(1) {
        let mut test = RuleTest {
            series: Vec::new(),
            checks: Vec::new(),
        };
        let mut series: Option<String> = None;
        for line in group.lines().skip(1) {
            if let Some(s) = quoted_after(line, "series:") {
                series = Some(s.to_owned());
            } else if let Some(v) = quoted_after(line, "values:") {
                let s = series.take().expect("values: follows series:");
                test.series.push((s, v.to_owned()));
            } else if let Some(alert) = quoted_after(line, "alertname:") {
                test.checks.push((alert.to_owned(), false));
            } else if line.trim() == "exp_alerts:" {
                test.checks
                    .last_mut()
                    .expect("exp_alerts: follows alertname:")
                    .1 = true;
            }
        }
        tests.push(test);
    }
    tests
}

#[test]
fn every_alert_has_a_unit_test_that_fires_it_and_one_outage_leaves_no_member() {
    let rules = repo_file("ops/alerts.yml");
    let tests = rule_tests(&repo_file("ops/alerts_test.yml"));
    assert!(!tests.is_empty(), "ops/alerts_test.yml has no test");
    for alert in alert_names(&rules) {
        assert!(
            tests
                .iter()
                .any(|t| t.checks.iter().any(|(a, fires)| *a == alert && *fires)),
            "no test of ops/alerts_test.yml expects {alert} to fire"
        );
    }
    // The total outage: every member's series ends stale (the process died), and the rules
    // must still fire for the role, though a sum over its members is then empty.
    let outage = tests.iter().find(|t| {
        let members: Vec<_> = t
            .series
            .iter()
            .filter(|(s, _)| s.starts_with(metrics::IS_LEADER))
            .collect();
        !members.is_empty()
            && members.iter().all(|(_, v)| v.trim_end().ends_with("stale"))
            && t.checks
                .iter()
                .any(|(a, fires)| a == "KafkaCoordinationRoleGone" && *fires)
            && t.checks
                .iter()
                .any(|(a, fires)| a == "KafkaCoordinationNoMembers" && *fires)
    });
    assert!(
        outage.is_some(),
        "no test of ops/alerts_test.yml ends every member's series and expects \
         KafkaCoordinationRoleGone and KafkaCoordinationNoMembers to fire"
    );
    assert!(
        rules.contains(&format!("absent({})", metrics::IS_LEADER)),
        "no rule fires on the absence of {}",
        metrics::IS_LEADER
    );
}

/// Whether this run is CI's (`CI` set, and not to `0` or `false`): tools must be there.
fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false")
}

/// `PROMTOOL`, else `.tools/bin/promtool`, else `promtool` on `PATH`.
fn promtool() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("PROMTOOL").filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        assert!(
            path.is_file(),
            "PROMTOOL={} is not a file; unset it or run scripts/ensure-promtool.sh",
            path.display()
        );
        return Some(path);
    }
    let local = repo_root().join(".tools/bin/promtool");
    if local.is_file() {
        return Some(local);
    }
    let on_path = Command::new("promtool").arg("--version").output();
    on_path
        .is_ok_and(|o| o.status.success())
        .then(|| PathBuf::from("promtool"))
}

fn run_promtool(promtool: &Path, args: &[&str]) {
    let out = Command::new(promtool)
        .args(args)
        .current_dir(repo_root())
        .output()
        .unwrap_or_else(|e| panic!("{} could not run: {e}", promtool.display()));
    assert!(
        out.status.success(),
        "promtool {} failed ({}):\n{}{}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn promtool_accepts_the_rules_and_their_unit_tests_pass() {
    let Some(promtool) = promtool() else {
        assert!(
            !in_ci(),
            "promtool is missing and CI is set: run scripts/ensure-promtool.sh (scripts/test.sh \
             does) or set PROMTOOL"
        );
        let _ = writeln!(
            std::io::stderr(),
            "\n*** SKIPPED: promtool is missing, so ops/alerts.yml was not checked and \
             ops/alerts_test.yml not run. Run: PROMTOOL=$(scripts/ensure-promtool.sh) cargo test \
             -p kafka-coordination-examples --test ops_kit ***\n"
        );
        return;
    };
    run_promtool(&promtool, &["check", "rules", "ops/alerts.yml"]);
    run_promtool(&promtool, &["test", "rules", "ops/alerts_test.yml"]);
}
