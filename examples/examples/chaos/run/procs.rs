//! The member processes: starting them, reading their event lines into their views, what
//! those views say, signals, and waits.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use kafka_coordination::describe::describe_leadership;
use kafka_coordination::FencingToken;

use crate::format::{Line, Pair};

use super::{now_ms, Orchestrator, Proc, View};

impl Orchestrator {
    pub(super) fn spawn(&mut self, member: String) -> Result<(), String> {
        let instance = self.next_instance;
        self.next_instance += 1;
        let exe = std::env::current_exe().map_err(|e| format!("the suite's own path: {e}"))?;
        let stderr = File::create(self.args.dir.join(format!("member-{instance}.stderr")))
            .map_err(|e| format!("cannot create a member's stderr file: {e}"))?;
        let ms = |d: Duration| d.as_millis().to_string();
        let mut command = self.member_command(exe, instance)?;
        command.arg("member");
        self.clock_env(&mut command, instance)?;
        if let (Some(url), Some(tables)) = (&self.args.postgres, &self.pg_tables) {
            command
                .args(["--postgres", url])
                .args(["--pg-fence", &tables.fence])
                .args(["--pg-rows", &tables.rows]);
        }
        let mut child = command
            .args(["--member", &member])
            .args(["--instance", &instance.to_string()])
            .args(["--roles", &self.roles.join(",")])
            .args(["--bootstrap", &self.args.bootstrap])
            .args(["--state-topic", &self.state_topic])
            .args(["--data-topic", &self.data_topic])
            .args(["--partitions", &self.args.partitions.to_string()])
            .args(["--lease-ms", &ms(self.args.lease)])
            .args(["--renew-ms", &ms(self.args.renew)])
            .args(["--stagger-ms", &ms(self.args.stagger)])
            .args(["--write-ms", &ms(self.args.write_every)])
            .arg("--journal")
            .arg(self.args.dir.join(format!("journal-{instance}.log")))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .map_err(|e| format!("cannot start a member process: {e}"))?;
        let stdout = child
            .stdout
            .take()
            .ok_or("the member's stdout is not piped")?;
        let tx = self.sender.clone();
        thread::spawn(move || {
            for l in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send((instance, Some(l))).is_err() {
                    return;
                }
            }
            let _ = tx.send((instance, None));
        });
        let stdin = child.stdin.take();
        self.record(
            "SPAWN",
            &[
                ("instance", instance.to_string()),
                ("member", member.clone()),
                ("pid", child.id().to_string()),
            ],
        )?;
        self.procs.push(Proc {
            instance,
            member,
            child,
            stdin,
            alive: true,
            stopped: false,
            views: HashMap::new(),
        });
        Ok(())
    }

    /// Takes in the members' reports until `until`.
    pub(super) fn pump(&mut self, until: Instant) {
        loop {
            let left = until.saturating_duration_since(Instant::now());
            match self.events.recv_timeout(left) {
                Ok((instance, text)) => self.take(instance, text),
                Err(_) => return,
            }
            if Instant::now() >= until {
                // Drain what is already there without waiting.
                while let Ok((instance, text)) = self.events.try_recv() {
                    self.take(instance, text);
                }
                return;
            }
        }
    }

    pub(super) fn take(&mut self, instance: u64, text: Option<String>) {
        let Some(p) = self.procs.iter_mut().find(|p| p.instance == instance) else {
            return;
        };
        let Some(text) = text else {
            p.alive = false;
            return;
        };
        let Ok(l) = Line::parse(&text) else {
            return;
        };
        let Some(role) = l.fields.get("role").map(str::to_owned) else {
            return;
        };
        let view = match l.event.as_str() {
            "CANDIDATE" | "CANDIDACY_FAILED" => View::Candidate,
            "STANDBY" => View::Standby,
            "ELECTED" => match (l.fields.pair("pair"), l.fields.number::<i64>("term")) {
                (Ok(pair), Ok(term)) => {
                    self.elected.push((l.at, role.clone(), term));
                    View::Leading { pair, term }
                }
                _ => return,
            },
            "ENDED" | "RESIGNED" => View::Ended,
            _ => return,
        };
        p.views.insert(role, view);
    }

    /// The live member that leads `role` with the largest term: (index, pair, term).
    pub(super) fn leader_of(&self, role: &str) -> Option<(usize, Pair, i64)> {
        self.procs
            .iter()
            .enumerate()
            .filter(|(_, p)| p.alive)
            .filter_map(|(i, p)| match p.views.get(role) {
                Some(View::Leading { pair, term }) => Some((i, *pair, *term)),
                _ => None,
            })
            .max_by_key(|(_, _, term)| *term)
    }

    /// Every role has a running leader whose pair is the coordinator's current one, and every
    /// running member is its leader or a standby.
    pub(super) fn unready(&self) -> Option<String> {
        for role in &self.roles {
            let Some((i, pair, term)) = self.leader_of(role) else {
                return Some(format!("role {role} has no leader"));
            };
            if self.procs[i].stopped {
                return Some(format!("the leader of {role} is stopped"));
            }
            for p in self.procs.iter().filter(|p| p.alive && !p.stopped) {
                match p.views.get(role) {
                    Some(View::Standby) => {}
                    Some(View::Leading { term: t, .. }) if *t == term => {}
                    other => {
                        return Some(format!("{} is {other:?} for {role}", p.name()));
                    }
                }
            }
            let token = FencingToken::new(pair.producer_id, pair.epoch);
            match describe_leadership(&self.observer, role) {
                Ok(status) if status.authoritative(&token) => {}
                Ok(status) => {
                    return Some(format!(
                        "{} believes it leads {role} with {pair}, but the coordinator's pair is \
                         {}",
                        self.procs[i].name(),
                        status.token
                    ))
                }
                Err(e) => return Some(format!("describing {role}: {e}")),
            }
        }
        None
    }

    /// Takes in reports until `done` holds (true) or `within` passes (false).
    pub(super) fn wait_for(
        &mut self,
        within: Duration,
        mut done: impl FnMut(&Orchestrator) -> bool,
    ) -> bool {
        let deadline = Instant::now() + within;
        loop {
            // Decide on everything the members have reported so far.
            self.pump(Instant::now());
            if done(self) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            self.pump((Instant::now() + Duration::from_millis(50)).min(deadline));
        }
    }

    /// Waits until neither an election nor an action of the orchestrator (a resume, a
    /// restart) has happened for a lease plus a stagger (at most 60 s), so that an extra short
    /// term after a failover, or the doings of a resumed member, happen before the next fault.
    pub(super) fn quiet(&mut self) {
        let quiet = (self.args.lease + self.args.stagger).as_millis() as i64;
        let settled = self.wait_for(Duration::from_secs(60), |o| {
            let last = o
                .elected
                .last()
                .map_or(o.last_action, |(at, _, _)| (*at).max(o.last_action));
            now_ms() - last >= quiet
        });
        if !settled {
            self.say("      elections went on for 60 s; moving on");
        }
    }

    pub(super) fn pause(&mut self, d: Duration) {
        self.pump(Instant::now() + d);
    }

    pub(super) fn signal(&self, index: usize, signal: &str) -> Result<(), String> {
        let pid = self.procs[index].child.id();
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(pid.to_string())
            .status()
            .map_err(|e| format!("kill -{signal} {pid}: {e}"))?;
        if !status.success() {
            return Err(format!("kill -{signal} {pid} failed: {status}"));
        }
        Ok(())
    }

    pub(super) fn sigkill(&mut self, index: usize) {
        let p = &mut self.procs[index];
        let _ = p.child.kill();
        let _ = p.child.wait();
        p.alive = false;
        p.stdin = None;
    }

    /// Asks every member to exit (resigning what it leads), and kills those that do not.
    pub(super) fn stop_members(&mut self) {
        let _ = self.record("END", &[("faults", self.faults.to_string())]);
        for i in 0..self.procs.len() {
            if !self.procs[i].alive {
                continue;
            }
            if self.procs[i].stopped {
                let _ = self.signal(i, "CONT");
                self.procs[i].stopped = false;
            }
            if let Some(mut stdin) = self.procs[i].stdin.take() {
                let _ = writeln!(stdin, "exit");
            }
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        for p in &mut self.procs {
            loop {
                match p.child.try_wait() {
                    Ok(Some(_)) | Err(_) => break,
                    Ok(None) if Instant::now() >= deadline => {
                        eprintln!("chaos: {} did not exit in time; killing it", p.name());
                        let _ = p.child.kill();
                        let _ = p.child.wait();
                        break;
                    }
                    Ok(None) => thread::sleep(Duration::from_millis(50)),
                }
            }
            p.alive = false;
        }
    }
}
