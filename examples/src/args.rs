//! A small hand-written parser for `--flag value`, `--flag=value` and `--switch` arguments
//! (no argument-parsing dependency, to keep the examples' build lean).

use std::collections::BTreeMap;
use std::fmt;

/// Why an example did not complete.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// The arguments were wrong; the message says how and shows the usage.
    Usage(String),
    /// Something in the scenario did not happen as expected.
    Failed(String),
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Usage(m) => write!(f, "usage error: {m}"),
            Failure::Failed(m) => write!(f, "failed: {m}"),
        }
    }
}

impl std::error::Error for Failure {}

impl From<String> for Failure {
    fn from(message: String) -> Self {
        Failure::Failed(message)
    }
}

impl From<&str> for Failure {
    fn from(message: &str) -> Self {
        Failure::Failed(message.to_owned())
    }
}

/// Returns `Err(Failure::Failed(message))` unless `condition` holds.
pub fn ensure(condition: bool, message: impl FnOnce() -> String) -> Result<(), Failure> {
    if condition {
        Ok(())
    } else {
        Err(Failure::Failed(message()))
    }
}

/// Parsed arguments.
#[derive(Clone, Debug, Default)]
pub struct Parsed {
    values: BTreeMap<String, String>,
    switches: Vec<String>,
}

impl Parsed {
    /// Whether `--help` or `-h` was given.
    pub fn help(&self) -> bool {
        self.switch("--help")
    }

    /// Whether the switch `name` (for example `--real-time`) was given.
    pub fn switch(&self, name: &str) -> bool {
        self.switches.iter().any(|s| s == name)
    }

    /// The value of `name`, if given.
    pub fn value(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    /// The value of `name` as a positive integer, or `default` when absent.
    pub fn positive(&self, name: &str, default: u64) -> Result<u64, Failure> {
        match self.value(name) {
            None => Ok(default),
            Some(v) => match v.parse::<u64>() {
                Ok(n) if n > 0 => Ok(n),
                _ => Err(Failure::Usage(format!(
                    "{name} needs a positive integer, got `{v}`"
                ))),
            },
        }
    }
}

/// Parses `args` (without the program name). `values` are the flags that take a value,
/// `switches` those that do not; `--help`/`-h` is always accepted. `usage` is appended to
/// every error message.
pub fn parse(
    args: &[String],
    values: &[&str],
    switches: &[&str],
    usage: &str,
) -> Result<Parsed, Failure> {
    let mut parsed = Parsed::default();
    let mut rest = args.iter();
    let bad = |m: String| Failure::Usage(format!("{m}\n\n{usage}"));
    while let Some(arg) = rest.next() {
        if arg == "--help" || arg == "-h" {
            parsed.switches.push("--help".to_owned());
            continue;
        }
        if switches.contains(&arg.as_str()) {
            parsed.switches.push(arg.clone());
            continue;
        }
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) => (n, Some(v.to_owned())),
            None => (arg.as_str(), None),
        };
        if !values.contains(&name) {
            return Err(bad(format!("unknown argument `{arg}`")));
        }
        let value = match inline {
            Some(v) => v,
            None => rest
                .next()
                .cloned()
                .ok_or_else(|| bad(format!("{name} needs a value")))?,
        };
        parsed.values.insert(name.to_owned(), value);
    }
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn parses_both_forms_and_switches() {
        let p = parse(
            &strings(&["--lease-ms", "2000", "--renew-ms=500", "--real-time"]),
            &["--lease-ms", "--renew-ms"],
            &["--real-time"],
            "usage",
        )
        .unwrap();
        assert_eq!(p.positive("--lease-ms", 1).unwrap(), 2000);
        assert_eq!(p.positive("--renew-ms", 1).unwrap(), 500);
        assert_eq!(p.positive("--stagger-ms", 7).unwrap(), 7);
        assert!(p.switch("--real-time") && !p.help());
    }

    #[test]
    fn rejects_unknown_missing_and_bad_values() {
        let usage = "usage";
        assert!(matches!(
            parse(&strings(&["--nope"]), &[], &[], usage),
            Err(Failure::Usage(_))
        ));
        assert!(matches!(
            parse(&strings(&["--lease-ms"]), &["--lease-ms"], &[], usage),
            Err(Failure::Usage(_))
        ));
        let p = parse(&strings(&["--lease-ms", "0"]), &["--lease-ms"], &[], usage).unwrap();
        assert!(p.positive("--lease-ms", 1).is_err());
    }
}
