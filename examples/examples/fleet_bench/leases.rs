//! The lease deadlines of a member's roles, read from the state topic with the CLI
//! (`kafka-coordination --json roles`): what a takeover after a kill is timed against.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;

/// How to list the state topic's roles: the CLI and its connection flags.
#[derive(Clone, Debug)]
pub struct LeaseReader {
    pub cli: PathBuf,
    /// `--bootstrap-servers B [--topic T] [--partitions N]`.
    pub connection: Vec<String>,
}

impl LeaseReader {
    /// Each role whose lease names `member` as its holder, with the lease's deadline (unix
    /// ms), as the state topic holds them now.
    pub fn deadlines_of(&self, member: &str) -> Result<HashMap<String, i64>, String> {
        let out = Command::new(&self.cli)
            .args(&self.connection)
            .args(["--json", "roles"])
            .output()
            .map_err(|e| format!("cannot run {}: {e}", self.cli.display()))?;
        if !out.status.success() {
            return Err(format!(
                "{} roles exited with {}: {}",
                self.cli.display(),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        deadlines_in(&out.stdout, member)
    }
}

/// The roles of `member` and their deadlines in the output of `--json roles`.
pub fn deadlines_in(json: &[u8], member: &str) -> Result<HashMap<String, i64>, String> {
    let v: serde_json::Value =
        serde_json::from_slice(json).map_err(|e| format!("the roles listing is not JSON: {e}"))?;
    let rows = v
        .as_array()
        .ok_or("the roles listing is not a JSON array")?;
    let mut out = HashMap::new();
    for row in rows {
        let leader = &row["leader"];
        if leader["member"].as_str() != Some(member) {
            continue;
        }
        let (Some(role), Some(deadline)) = (row["role"].as_str(), leader["deadline_ms"].as_i64())
        else {
            return Err(format!("a role's row lacks its name or deadline: {row}"));
        };
        out.insert(role.to_owned(), deadline);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deadlines_of_one_members_leases_are_read_and_bad_rows_named() {
        let json = br#"[
            {"role": "r-0", "leader": {"member": "m3", "deadline_ms": 5000}},
            {"role": "r-1", "leader": {"member": "m1", "deadline_ms": 6000}},
            {"role": "r-2", "leader": null}
        ]"#;
        let d = deadlines_in(json, "m3").unwrap();
        assert_eq!(d, HashMap::from([("r-0".to_owned(), 5000)]));
        assert!(deadlines_in(b"{}", "m3").unwrap_err().contains("array"));
        assert!(deadlines_in(b"nope", "m3")
            .unwrap_err()
            .contains("not JSON"));
        let bad = br#"[{"role": "r-0", "leader": {"member": "m3"}}]"#;
        assert!(deadlines_in(bad, "m3").unwrap_err().contains("lacks"));
    }
}
