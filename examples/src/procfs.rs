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

/// CPU seconds used so far by every process of `pids` (comma-separated, as
/// `--broker-pid 1,2,3`), summed: a cluster's brokers, say.
pub fn cpu_seconds_sum(pids: &str) -> f64 {
    pids.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(cpu_seconds)
        .sum()
}

/// The whole machine's CPU time so far, from the first line of `/proc/stat`, in clock ticks:
/// what a benchmark compares between two instants to tell a busy or stolen machine from slow
/// code.
#[derive(Clone, Copy, Debug, Default)]
pub struct MachineCpu {
    /// user, nice, system, irq and softirq time.
    pub busy: u64,
    /// idle and iowait time.
    pub idle: u64,
    /// Time the hypervisor gave to other guests while this one wanted to run.
    pub steal: u64,
}

impl MachineCpu {
    /// Now. All zeros where `/proc/stat` cannot be read.
    pub fn now() -> MachineCpu {
        let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        let line = stat.lines().next().unwrap_or("");
        let mut fields = line.split_whitespace();
        if fields.next() != Some("cpu") {
            return MachineCpu::default();
        }
        let v: Vec<u64> = fields.map(|f| f.parse().unwrap_or(0)).collect();
        let at = |i: usize| v.get(i).copied().unwrap_or(0);
        // user nice system idle iowait irq softirq steal
        MachineCpu {
            busy: at(0) + at(1) + at(2) + at(5) + at(6),
            idle: at(3) + at(4),
            steal: at(7),
        }
    }

    /// The machine's share of busy and stolen time since `earlier`, as "busy B %, stolen S %"
    /// of all its cores' time.
    pub fn since(&self, earlier: &MachineCpu) -> String {
        let busy = self.busy.saturating_sub(earlier.busy);
        let idle = self.idle.saturating_sub(earlier.idle);
        let steal = self.steal.saturating_sub(earlier.steal);
        let total = (busy + idle + steal).max(1) as f64;
        format!(
            "busy {:.0} %, stolen {:.1} %",
            busy as f64 * 100.0 / total,
            steal as f64 * 100.0 / total
        )
    }
}
