//! The processes of a term: every descendant of the supervisor, found, signalled and reaped.
//!
//! On Linux the supervisor is a child subreaper (`PR_SET_CHILD_SUBREAPER`), so a process its
//! child leaves behind (a double fork, a `setsid` daemon whose parent exited) becomes the
//! supervisor's own child instead of init's; the live descendants are read from `/proc`, so a
//! process that left the child's process group is found too. Elsewhere only the child's
//! process group is known.

use std::io;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

/// Prepares the supervisor: on Linux a child subreaper (orphans of its child's processes
/// become its own children, which it signals and reaps) and not dumpable (`PR_SET_DUMPABLE`
/// 0: a process of the same user, the child included, can neither read
/// `/proc/<supervisor>/environ` or its memory, nor attach to it).
pub fn prepare_supervisor() -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: prctl with integer arguments only; no memory is passed.
        if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: as above.
        if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Reaps every child of the supervisor that has exited, without blocking: its pid and status.
pub fn reap() -> Vec<(u32, ExitStatus)> {
    let mut out = Vec::new();
    loop {
        let mut status: libc::c_int = 0;
        // SAFETY: waitpid writes the status into a local integer.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        let Ok(pid) = u32::try_from(pid) else { break };
        if pid == 0 {
            break;
        }
        out.push((pid, ExitStatus::from_raw(status)));
    }
    out
}

/// Sends `signal` to the process group `group` and to each of `pids`. A process that is gone
/// answers ESRCH, ignored.
pub fn signal_all(group: u32, pids: &[u32], signal: i32) {
    let ids = std::iter::once(i64::from(group).checked_neg())
        .chain(pids.iter().map(|p| Some(i64::from(*p))));
    for id in ids.flatten() {
        let Ok(id) = libc::pid_t::try_from(id) else {
            continue;
        };
        if id == 0 || id == -1 || id == 1 {
            continue; // never the caller's own group, every process, or init
        }
        // SAFETY: kill(2) has no memory effects.
        unsafe {
            libc::kill(id, signal);
        }
    }
}

/// The live (not yet exited) descendants of the supervisor. `child`: the child's pid while it
/// has not been reaped (used where `/proc` is not).
pub fn live_descendants(child: Option<u32>) -> Vec<u32> {
    #[cfg(target_os = "linux")]
    {
        let _ = child;
        descendants_of(std::process::id(), &read_proc())
    }
    #[cfg(not(target_os = "linux"))]
    {
        child.into_iter().collect()
    }
}

/// Every process in `/proc` as (pid, parent pid, exited), exited being a zombie or dead.
#[cfg(target_os = "linux")]
fn read_proc() -> Vec<(u32, u32, bool)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            parse_stat(&stat).map(|(ppid, exited)| (pid, ppid, exited))
        })
        .collect()
}

#[cfg(any(target_os = "linux", test))]
/// The parent pid and whether the process has exited, from a `/proc/<pid>/stat` line: `pid
/// (comm) state ppid ...`, where comm may hold spaces and parentheses (so the last `)` ends it).
fn parse_stat(stat: &str) -> Option<(u32, bool)> {
    let rest = stat.get(stat.rfind(')')? + 1..)?;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?;
    let ppid = fields.next()?.parse().ok()?;
    Some((ppid, matches!(state, "Z" | "X" | "x")))
}

#[cfg(any(target_os = "linux", test))]
/// The live descendants of `root` in `table` (pid, parent pid, exited). An exited process's
/// children are still followed (they wait to be reparented).
fn descendants_of(root: u32, table: &[(u32, u32, bool)]) -> Vec<u32> {
    let mut frontier = vec![root];
    let mut seen = vec![root];
    let mut live = Vec::new();
    while let Some(parent) = frontier.pop() {
        for &(pid, ppid, exited) in table {
            if ppid == parent && !seen.contains(&pid) {
                seen.push(pid);
                frontier.push(pid);
                if !exited {
                    live.push(pid);
                }
            }
        }
    }
    live.sort_unstable();
    live
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_gives_the_parent_and_whether_it_exited() {
        assert_eq!(parse_stat("42 (sh) S 7 42 42 0"), Some((7, false)));
        assert_eq!(parse_stat("42 (a) b) (c) Z 9 1 1"), Some((9, true)));
        assert_eq!(parse_stat("42 (x"), None);
    }

    #[test]
    fn descendants_are_found_through_exited_parents_and_across_sessions() {
        // 10 is the supervisor; 11 its child; 12 a worker of 11; 13 a zombie whose child 14
        // lives on; 20 belongs to someone else.
        let table = [
            (11, 10, false),
            (12, 11, false),
            (13, 11, true),
            (14, 13, false),
            (20, 1, false),
            (21, 20, false),
        ];
        assert_eq!(descendants_of(10, &table), vec![11, 12, 14]);
        assert_eq!(descendants_of(99, &table), Vec::<u32>::new());
    }
}
