//! The member processes: started from the `fleet_member` binary, their stdout read line by
//! line on a thread each (every line is also kept in `<dir>/<member>#<k>.events`, their
//! stderr goes to `<dir>/<member>#<k>.stderr`), signalled, reaped.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kafka_coordination_examples::procfs::cpu_seconds;

use crate::ledger::Ledger;

/// Now, in unix ms, on the system clock (the members stamp their lines on the same clock).
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

enum Message {
    Line(usize, String, i64),
    Closed(usize, i64),
}

/// How one member process is started.
#[derive(Clone, Debug)]
pub struct Spec {
    pub member: String,
    pub version: u32,
    pub policy: String,
}

struct Running {
    child: Child,
    pid: u32,
    /// Whether the bench signalled it to end (SIGTERM or SIGKILL): its exit is expected.
    ending: bool,
    /// Whether it was seen to exit.
    reaped: bool,
}

/// The member processes of a run, by process id (the [`Ledger`]'s).
pub struct Members {
    bin: PathBuf,
    /// The flags every member gets (cluster, topics, roles, timing).
    common: Vec<String>,
    dir: PathBuf,
    procs: Vec<Running>,
    /// Per process, its CPU seconds at the last sample (kept after it exits).
    cpu: Vec<f64>,
    last_sample: Instant,
    tx: Sender<Message>,
    rx: Receiver<Message>,
}

impl Members {
    /// Members run from `bin` with the flags `common`; their output goes to `dir` (created).
    pub fn new(bin: PathBuf, common: Vec<String>, dir: PathBuf) -> Result<Members, String> {
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create the output directory {}: {e}", dir.display()))?;
        let (tx, rx) = mpsc::channel();
        Ok(Members {
            bin,
            common,
            dir,
            procs: Vec::new(),
            cpu: Vec::new(),
            last_sample: Instant::now(),
            tx,
            rx,
        })
    }

    /// Where the member processes' output goes.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Starts a process of `spec`; returns its id (the ledger's).
    pub fn spawn(&mut self, ledger: &mut Ledger, spec: &Spec) -> Result<usize, String> {
        let at = now_ms();
        let p = ledger.spawned(&spec.member, spec.version, at);
        debug_assert_eq!(p, self.procs.len());
        let label = ledger.label(p);
        let stderr_path = self.dir.join(format!("{label}.stderr"));
        let stderr = File::create(&stderr_path)
            .map_err(|e| format!("cannot create {}: {e}", stderr_path.display()))?;
        let events_path = self.dir.join(format!("{label}.events"));
        let mut events = File::create(&events_path)
            .map_err(|e| format!("cannot create {}: {e}", events_path.display()))?;
        let mut child = Command::new(&self.bin)
            .arg("--member")
            .arg(&spec.member)
            .arg("--version")
            .arg(spec.version.to_string())
            .arg("--policy")
            .arg(&spec.policy)
            .args(&self.common)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .map_err(|e| format!("cannot start {} for {label}: {e}", self.bin.display()))?;
        let pid = child.id();
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| format!("{label}: no stdout pipe"))?;
        let tx = self.tx.clone();
        thread::Builder::new()
            .name(format!("read-{label}"))
            .spawn(move || {
                let mut reader = BufReader::new(stdout);
                let mut line = String::new();
                loop {
                    line.clear();
                    match reader.read_line(&mut line) {
                        Ok(0) | Err(_) => break,
                        Ok(_) => {
                            let received = now_ms();
                            let _ = events.write_all(line.as_bytes());
                            let text = line.trim_end_matches(['\n', '\r']).to_owned();
                            if tx.send(Message::Line(p, text, received)).is_err() {
                                return;
                            }
                        }
                    }
                }
                let _ = tx.send(Message::Closed(p, now_ms()));
            })
            .map_err(|e| format!("cannot start the reader thread of {label}: {e}"))?;
        self.procs.push(Running {
            child,
            pid,
            ending: false,
            reaped: false,
        });
        self.cpu.push(0.0);
        Ok(p)
    }

    /// SIGKILLs process `p`; returns the instant, noted in the ledger as its kill.
    pub fn kill(&mut self, ledger: &mut Ledger, p: usize) -> i64 {
        let run = &mut self.procs[p];
        run.ending = true;
        self.cpu[p] = cpu_seconds(&run.pid.to_string()).max(self.cpu[p]);
        let at = now_ms();
        let _ = run.child.kill();
        ledger.killed(p, at);
        at
    }

    /// Sends `signal` (`TERM`, `USR1`) to process `p`; `ending`: the bench expects it to exit.
    pub fn signal(&mut self, p: usize, signal: &str, ending: bool) -> Result<i64, String> {
        let run = &mut self.procs[p];
        run.ending |= ending;
        let at = now_ms();
        let status = Command::new("kill")
            .arg("-s")
            .arg(signal)
            .arg(run.pid.to_string())
            .status()
            .map_err(|e| format!("cannot run kill -s {signal} {}: {e}", run.pid))?;
        if !status.success() {
            return Err(format!("kill -s {signal} {} failed: {status}", run.pid));
        }
        Ok(at)
    }

    /// Whether process `p` was seen to exit.
    pub fn reaped(&self, p: usize) -> bool {
        self.procs[p].reaped
    }

    /// CPU seconds used by every member process so far (sampled about every second, and at
    /// each kill).
    pub fn cpu_seconds(&self) -> f64 {
        self.cpu.iter().sum()
    }

    /// Feeds the ledger every line that arrives within `budget` (at least the first one, if
    /// any comes), reaps processes that exited, samples CPU. An exit the bench did not cause
    /// is an error naming the process and its stderr file.
    pub fn pump(&mut self, ledger: &mut Ledger, budget: Duration) -> Result<(), String> {
        let mut next = match self.rx.recv_timeout(budget) {
            Ok(m) => Some(m),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => None,
        };
        let mut taken = 0;
        while let Some(message) = next {
            match message {
                Message::Line(p, line, received) => ledger.line(p, &line, received),
                Message::Closed(p, at) => ledger.closed(p, at),
            }
            taken += 1;
            next = if taken < 100_000 {
                self.rx.try_recv().ok()
            } else {
                None
            };
        }
        if self.last_sample.elapsed() >= Duration::from_secs(1) {
            self.last_sample = Instant::now();
            for (p, run) in self.procs.iter().enumerate() {
                if !run.reaped {
                    self.cpu[p] = cpu_seconds(&run.pid.to_string()).max(self.cpu[p]);
                }
            }
        }
        let mut unexpected = Vec::new();
        for (p, run) in self.procs.iter_mut().enumerate() {
            if run.reaped {
                continue;
            }
            if let Ok(Some(status)) = run.child.try_wait() {
                run.reaped = true;
                let how = describe(status);
                ledger.exited(p, now_ms(), how.clone());
                if !run.ending {
                    unexpected.push((p, how));
                }
            }
        }
        if let Some((p, how)) = unexpected.first() {
            let label = ledger.label(*p);
            let path = self.dir.join(format!("{label}.stderr"));
            let tail = std::fs::read_to_string(&path)
                .map(|s| {
                    let lines: Vec<&str> = s.lines().collect();
                    lines[lines.len().saturating_sub(10)..].join("\n")
                })
                .unwrap_or_default();
            return Err(format!(
                "member process {label} exited by itself ({how}); its stderr is in {}{}",
                path.display(),
                if tail.is_empty() {
                    String::new()
                } else {
                    format!(", ending with:\n{tail}")
                }
            ));
        }
        Ok(())
    }

    /// Ends every process still running: SIGTERM (a drain), then SIGKILL for those that have
    /// not exited within `grace`; reads their output to its end. Returns the labels of those
    /// that had to be killed.
    pub fn stop_all(&mut self, ledger: &mut Ledger, grace: Duration) -> Vec<String> {
        for p in 0..self.procs.len() {
            if !self.procs[p].reaped {
                let _ = self.signal(p, "TERM", true);
            }
        }
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline && self.procs.iter().any(|r| !r.reaped) {
            let _ = self.pump(ledger, Duration::from_millis(100));
        }
        let mut killed = Vec::new();
        for p in 0..self.procs.len() {
            if !self.procs[p].reaped {
                killed.push(ledger.label(p));
                self.kill(ledger, p);
            }
        }
        // Read what is left, until every stdout has closed (a short while: killed processes
        // close theirs at once).
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline && (0..self.procs.len()).any(|p| !ledger.proc(p).closed) {
            let _ = self.pump(ledger, Duration::from_millis(100));
        }
        killed
    }
}

impl Drop for Members {
    fn drop(&mut self) {
        // A bench that stops early leaves no member behind.
        for run in &mut self.procs {
            if !run.reaped {
                let _ = run.child.kill();
                let _ = run.child.wait();
            }
        }
    }
}

fn describe(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit {code}"),
        (None, Some(signal)) => format!("signal {signal}"),
        (None, None) => status.to_string(),
    }
}
