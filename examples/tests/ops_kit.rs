//! The operator's kit (`ops/`): every metric and label that the alert rules and the Grafana
//! dashboard name is one the library exports, the rules have what Prometheus needs, the
//! dashboard is valid JSON, and the guide lists every alert.

use std::collections::BTreeSet;
use std::path::PathBuf;

use kafka_coordination::metrics;

fn repo_file(path: &str) -> String {
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(path);
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
