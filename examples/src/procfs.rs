//! What a benchmark reports of a process, read from `/proc` (Linux): threads, resident
//! memory, open sockets and CPU time. Zeros where `/proc` cannot be read.

/// Threads, RSS (KiB) and open sockets of this process, from /proc.
pub fn own_resources() -> (usize, u64, usize) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    let sockets = std::fs::read_dir("/proc/self/fd")
        .map(|d| {
            d.flatten()
                .filter(|e| {
                    std::fs::read_link(e.path())
                        .map(|t| t.to_string_lossy().starts_with("socket:"))
                        .unwrap_or(false)
                })
                .count()
        })
        .unwrap_or(0);
    (field("Threads:") as usize, field("VmRSS:"), sockets)
}

/// CPU seconds (user + system) used so far by `pid` ("self" for this process).
pub fn cpu_seconds(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may contain spaces): utime is the 14th field.
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // `after` starts at field 3 (state); utime = field 14, stime = field 15.
    (ticks(11) + ticks(12)) / 100.0
}
