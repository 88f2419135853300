//! Clock faults (`--clock-faults N`): member processes run with libfaketime preloaded, each
//! reading its clock offset from a file of its own (`clock-<instance>` in the run directory),
//! which the orchestrator rewrites to move that member's clock while it runs.
//!
//! Only the wall clock (CLOCK_REALTIME, `SystemTime`) is faked: `FAKETIME_DONT_FAKE_MONOTONIC=1`
//! leaves CLOCK_MONOTONIC (`Instant`) alone. That is the fault a real host shows (an NTP step
//! or a wrong RTC moves the wall clock; the monotonic clock never jumps), and it is also the
//! only setting that works: with the monotonic clock faked, std's futex waits (an absolute
//! CLOCK_MONOTONIC deadline the kernel compares with the real clock) never time out, and a
//! `recv_timeout` hangs. The library reads its `Clock` (`SystemClock`: the wall clock) for
//! everything it schedules: the deadlines of the lease records a member writes, the deadlines
//! it reads, and the instants its renewals and turns are due. A skewed member does all of that
//! on its skewed clock; the transport's request timeouts (monotonic) run true.
//!
//! Three kinds, in turn:
//! - `clock-ahead-leader`: a leader's clock runs S ahead (a lease to twice the default
//!   `max_clock_skew`) for three leases, then the leader is killed: its last lease names a
//!   deadline S late, and a standby trusts that at most `max_clock_skew` past a lease.
//! - `clock-behind-standby`: a standby's clock runs S behind (one to four leases) for three
//!   leases, then is set right: the leader must keep its term.
//! - `clock-jump-leader`: a leader's clock jumps J ahead (two to four leases), back to the true
//!   time, then J behind it, each for J and two leases, until the leader loses its term; then
//!   is set right.
//!
//! Each skew stays inside the broker's default timestamp window (an hour ahead,
//! `log.message.timestamp.after.max.ms`), so that no lease record is refused as
//! INVALID_TIMESTAMP.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use kafka_coordination::core::machine::DEFAULT_MAX_CLOCK_SKEW;

use crate::format::Pair;
use crate::liveness::FaultKind;

use super::Orchestrator;

/// Where Debian and others put the preload library.
const LIBRARY_PATHS: [&str; 4] = [
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/faketime/libfaketime.so.1",
    "/usr/local/lib/faketime/libfaketime.so.1",
];

/// The clock faults' state: the library (when clock faults are asked for) and what each fault
/// did, for the closing summary.
#[derive(Default)]
pub struct Clocks {
    library: Option<PathBuf>,
    pub done: usize,
    outcomes: Vec<String>,
}

impl Clocks {
    /// With `faults > 0`, finds libfaketime (`KC_LIBFAKETIME`, else the usual paths).
    pub fn new(faults: usize) -> Result<Clocks, String> {
        if faults == 0 {
            return Ok(Clocks::default());
        }
        let library = match std::env::var_os("KC_LIBFAKETIME") {
            Some(path) => {
                let path = PathBuf::from(path);
                if !path.is_file() {
                    return Err(format!(
                        "KC_LIBFAKETIME names {}, which is not a file",
                        path.display()
                    ));
                }
                path
            }
            None => LIBRARY_PATHS
                .iter()
                .map(PathBuf::from)
                .find(|p| p.is_file())
                .ok_or_else(|| {
                    format!(
                        "--clock-faults needs libfaketime, found at none of {}: install Debian's \
                         `faketime` (scripts/ensure-deps.sh does) or set KC_LIBFAKETIME",
                        LIBRARY_PATHS.join(", ")
                    )
                })?,
        };
        Ok(Clocks {
            library: Some(library),
            ..Clocks::default()
        })
    }
}

fn offset_file(dir: &Path, instance: u64) -> PathBuf {
    dir.join(format!("clock-{instance}"))
}

/// Writes an offset in libfaketime's relative form (`+2.500`, `-7.250`, seconds), by a rename
/// so that the library never reads half a file.
fn write_offset(file: &Path, ms: i64) -> Result<(), String> {
    let text = format!(
        "{}{}.{:03}\n",
        if ms < 0 { '-' } else { '+' },
        ms.unsigned_abs() / 1000,
        ms.unsigned_abs() % 1000
    );
    let tmp = file.with_extension("tmp");
    fs::write(&tmp, text)
        .and_then(|()| fs::rename(&tmp, file))
        .map_err(|e| format!("cannot write {}: {e}", file.display()))
}

fn seconds(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

impl Orchestrator {
    /// The hook where a member's command is built: with clock faults, the member starts with
    /// libfaketime preloaded and its offset file at +0.
    pub(super) fn clock_env(&self, command: &mut Command, instance: u64) -> Result<(), String> {
        let Some(library) = &self.clocks.library else {
            return Ok(());
        };
        let file = offset_file(&self.args.dir, instance);
        write_offset(&file, 0)?;
        command
            .env("LD_PRELOAD", library)
            .env("FAKETIME_TIMESTAMP_FILE", &file)
            .env("FAKETIME_NO_CACHE", "1")
            .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
        Ok(())
    }

    /// Moves a member's wall clock `ms` away from the true time.
    fn set_offset(&mut self, index: usize, ms: i64) -> Result<(), String> {
        let instance = self.procs[index].instance;
        write_offset(&offset_file(&self.args.dir, instance), ms)?;
        self.record(
            "CLOCK",
            &[
                ("instance", instance.to_string()),
                ("offset_ms", ms.to_string()),
            ],
        )
    }

    /// The next fault's kind when it is a clock fault: every other fault until
    /// `--clock-faults` of them, the three kinds in turn.
    pub(super) fn clock_kind(&self) -> Option<FaultKind> {
        const KINDS: [FaultKind; 3] = [
            FaultKind::ClockAheadLeader,
            FaultKind::ClockBehindStandby,
            FaultKind::ClockJumpLeader,
        ];
        (self.clocks.done < self.args.clock_faults && self.faults.is_multiple_of(2))
            .then(|| KINDS[self.clocks.done % KINDS.len()])
    }

    /// The roles process `target` leads: (role, pair, term).
    pub(super) fn led_by(&self, target: usize) -> Vec<(String, Pair, i64)> {
        self.roles
            .iter()
            .filter_map(|r| match self.leader_of(r) {
                Some((i, p, t)) if i == target => Some((r.clone(), p, t)),
                _ => None,
            })
            .collect()
    }

    /// Of `old` (role, term), the roles whose leader has a larger term.
    fn moved(&self, old: &[(String, i64)]) -> Vec<String> {
        old.iter()
            .filter(|(r, t)| self.leader_of(r).is_some_and(|(_, _, term)| term > *t))
            .map(|(r, _)| self.short(r))
            .collect()
    }

    /// Watches for `hold`: when a role of `old` gets a new leader first, how long after the
    /// start that was.
    fn watch(&mut self, old: &[(String, i64)], hold: Duration) -> Option<Duration> {
        let started = Instant::now();
        let moved = self.wait_for(hold, |o| !o.moved(old).is_empty());
        let at = moved.then(|| started.elapsed());
        self.pause(hold.saturating_sub(started.elapsed()));
        at
    }

    fn outcome(&mut self, text: String) -> Result<(), String> {
        self.say(&format!("      {text}"));
        self.record(
            "CLOCK_OUTCOME",
            &[
                ("n", self.faults.to_string()),
                ("what", text.replace(' ', "_")),
            ],
        )?;
        let line = format!("#{} {text}", self.faults);
        self.clocks.outcomes.push(line);
        Ok(())
    }

    /// Injects a clock fault; returns the failovers it caused.
    pub(super) fn clock_fault(&mut self, kind: FaultKind) -> Result<usize, String> {
        let lease = self.args.lease;
        match kind {
            FaultKind::ClockBehindStandby => self.clock_behind_standby(lease),
            _ => {
                let role = self.roles[self.rng.below(self.roles.len())].clone();
                let Some((target, _, _)) = self.leader_of(&role) else {
                    return Ok(0);
                };
                let led = self.led_by(target);
                if kind == FaultKind::ClockAheadLeader {
                    self.clock_ahead_leader(target, &led, lease)
                } else {
                    self.clock_jump_leader(target, &led, lease)
                }
            }
        }
    }

    fn clock_ahead_leader(
        &mut self,
        target: usize,
        led: &[(String, Pair, i64)],
        lease: Duration,
    ) -> Result<usize, String> {
        let skew = self.rng.millis(lease, DEFAULT_MAX_CLOCK_SKEW * 2);
        let pairs: Vec<(String, Pair)> = led.iter().map(|(r, p, _)| (r.clone(), *p)).collect();
        let old: Vec<(String, i64)> = led.iter().map(|(r, _, t)| (r.clone(), *t)).collect();
        self.clocks.done += 1;
        self.fault_line(
            FaultKind::ClockAheadLeader,
            Some(target),
            &pairs,
            &[("skew_ms", skew.as_millis().to_string())],
        )?;
        let name = self.procs[target].name();
        self.say(&format!(
            "#{} clock-ahead-leader {name}: +{} for 3 leases, then killed",
            self.faults,
            seconds(skew)
        ));
        let others: Vec<(String, i64)> = self
            .roles
            .iter()
            .filter(|r| !old.iter().any(|(o, _)| o == *r))
            .map(|r| (r.clone(), self.leader_of(r).map_or(-1, |(_, _, t)| t)))
            .collect();
        self.set_offset(target, skew.as_millis() as i64)?;
        let lost = self.watch(&old, lease * 3);
        let mut kept = match lost {
            Some(at) => format!("LOST a term {} into the skew", seconds(at)),
            None => "kept its term(s) 3 leases".to_owned(),
        };
        let taken: Vec<String> = self
            .moved(&others)
            .into_iter()
            .filter(|r| {
                self.roles
                    .iter()
                    .find(|role| self.short(role) == *r)
                    .and_then(|role| self.leader_of(role))
                    .is_some_and(|(i, _, _)| i == target)
            })
            .collect();
        if !taken.is_empty() {
            kept.push_str(&format!(
                ", and as a standby ahead took {} from a healthy leader",
                taken.join(",")
            ));
        }
        self.sigkill(target);
        let killed = Instant::now();
        let moved = self.await_successors(&old);
        let took = killed.elapsed();
        let bound = lease + skew.min(DEFAULT_MAX_CLOCK_SKEW);
        self.outcome(format!(
            "clock-ahead-leader {name} +{}: {kept}; killed, a writable leader {} after the kill \
             (lease + min(skew, max_clock_skew) = {})",
            seconds(skew),
            seconds(took),
            seconds(bound)
        ))?;
        let member = self.procs[target].member.clone();
        self.restart(member)?;
        self.quiet();
        Ok(moved)
    }

    fn clock_behind_standby(&mut self, lease: Duration) -> Result<usize, String> {
        let standbys: Vec<usize> = (0..self.procs.len())
            .filter(|&i| {
                let p = &self.procs[i];
                p.alive && !p.stopped && self.led_by(i).is_empty()
            })
            .collect();
        if standbys.is_empty() {
            return Ok(0);
        }
        let target = standbys[self.rng.below(standbys.len())];
        let skew = self.rng.millis(lease, lease * 4);
        let old: Vec<(String, i64)> = self
            .roles
            .iter()
            .map(|r| (r.clone(), self.leader_of(r).map_or(-1, |(_, _, t)| t)))
            .collect();
        self.clocks.done += 1;
        self.fault_line(
            FaultKind::ClockBehindStandby,
            Some(target),
            &[],
            &[("skew_ms", format!("-{}", skew.as_millis()))],
        )?;
        let name = self.procs[target].name();
        self.say(&format!(
            "#{} clock-behind-standby {name}: -{} for 3 leases",
            self.faults,
            seconds(skew)
        ));
        let before = self.elected.len();
        self.set_offset(target, -(skew.as_millis() as i64))?;
        let lost = self.watch(&old, lease * 3);
        self.set_offset(target, 0)?;
        self.quiet();
        let moved = self.moved(&old);
        let text = match lost {
            None if moved.is_empty() => "every leader kept its term".to_owned(),
            _ => format!(
                "LEADERS CHANGED on {} ({} election(s))",
                moved.join(","),
                self.elected.len() - before
            ),
        };
        self.outcome(format!(
            "clock-behind-standby {name} -{}: {text}",
            seconds(skew)
        ))?;
        Ok(0)
    }

    fn clock_jump_leader(
        &mut self,
        target: usize,
        led: &[(String, Pair, i64)],
        lease: Duration,
    ) -> Result<usize, String> {
        let jump = self.rng.millis(lease * 2, lease * 4);
        let pairs: Vec<(String, Pair)> = led.iter().map(|(r, p, _)| (r.clone(), *p)).collect();
        let old: Vec<(String, i64)> = led.iter().map(|(r, _, t)| (r.clone(), *t)).collect();
        self.clocks.done += 1;
        self.fault_line(
            FaultKind::ClockJumpLeader,
            Some(target),
            &pairs,
            &[("jump_ms", jump.as_millis().to_string())],
        )?;
        let name = self.procs[target].name();
        let j = seconds(jump);
        self.say(&format!(
            "#{} clock-jump-leader {name}: +{j}, back to the true time, then -{j}, each for {j} \
             and 2 leases",
            self.faults
        ));
        let ms = jump.as_millis() as i64;
        let phases = [
            (ms, format!("the jump forward by {j}")),
            (0, format!("the jump back by {j} to the true time")),
            (-ms, format!("the jump back by {j} from the true time")),
        ];
        // Each step lasts the jump and two leases: a step back makes the leader's next
        // renewal due the jump later, and its term is lost only if its last lease runs out
        // first.
        let hold = jump + lease * 2;
        let mut lost = None;
        for (offset, what) in phases {
            self.set_offset(target, offset)?;
            if let Some(at) = self.watch(&old, hold) {
                lost = Some((at, what));
                break;
            }
        }
        self.set_offset(target, 0)?;
        let (text, moved) = match lost {
            Some((at, what)) => {
                let moved = self.await_successors(&old);
                (
                    format!(
                        "lost its term(s) at {what}: a new leader {} after it",
                        seconds(at)
                    ),
                    moved,
                )
            }
            None => ("kept its term(s) through every jump".to_owned(), 0),
        };
        self.quiet();
        self.outcome(format!("clock-jump-leader {name} +/-{j}: {text}"))?;
        Ok(moved)
    }

    /// The clock faults' summary, after the run.
    pub(super) fn clock_report(&self) {
        if self.clocks.outcomes.is_empty() {
            return;
        }
        self.say(&format!("clock faults ({}):", self.clocks.outcomes.len()));
        for line in &self.clocks.outcomes {
            self.say(&format!("  {line}"));
        }
    }
}
