#!/usr/bin/env python3
"""The chaos suite's supervisor scenario: `kafka-coordination run` supervisors of one role, each
running a start script whose two workers ignore SIGTERM (one of them in a session of its own),
while seeded faults end the leader's term: SIGTERM to its supervisor (a deploy), SIGKILL of its
child (a crash; the workers are orphaned), SIGTERM of its child (the script exits 0, the workers
go on). Each worker appends `MEMBER TERM MILLIS PID` to a shared file for every unit of work.

The history decides, not the supervisors' logs: a unit of work of term T stamped at or after
the election of the next term is a violation (two writers), and so is any worker still alive
at the end. Run it through `scripts/chaos.sh --supervisor`, which builds the tool and starts a
broker; directly:

    KAFKA_BOOTSTRAP=HOST:PORT scripts/chaos-supervisor.py --bin target/debug/kafka-coordination

Exits 1 on any violation or when fewer than --faults faults completed, 2 on bad arguments.
"""

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import time

WORKERS = r'''trap "exit 0" TERM
work='trap "" TERM; while :; do echo "$KC_MEMBER $KC_TERM $(date +%s%3N) $$" >> "$0"; sleep 0.05; done'
bash -c "$work" "$0" &
setsid bash -c "$work" "$0" &
wait'''

FAULTS = ("sigterm-supervisor", "sigkill-child", "sigterm-child")


def say(text):
    print(f"chaos-supervisor: {text}", file=sys.stderr, flush=True)


def events(path):
    """The JSON events a supervisor printed so far."""
    out = []
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    v = json.loads(line)
                except ValueError:
                    continue
                if isinstance(v, dict) and "event" in v:
                    out.append(v)
    except FileNotFoundError:
        pass
    return out


def work_lines(path):
    """(member, term, millis, pid) of every unit of work written so far."""
    out = []
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                parts = line.split()
                if len(parts) != 4:
                    continue
                try:
                    out.append((parts[0], int(parts[1]), int(parts[2]), int(parts[3])))
                except ValueError:
                    continue
    except FileNotFoundError:
        pass
    return out


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie is not at work: read its state.
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


class Scenario:
    def __init__(self, a):
        self.a = a
        self.rng = random.Random(a.seed)
        self.dir = a.dir
        os.makedirs(self.dir, exist_ok=True)
        self.work = os.path.join(self.dir, "work.log")
        self.role = f"chaos-supervised-{a.seed}-{int(time.time())}"
        self.procs = {}  # member -> Popen
        self.faults = []  # (kind, member, term, at_ms)

    def events_of(self, member):
        return events(os.path.join(self.dir, f"{member}.events"))

    def start(self, member):
        env = dict(os.environ, KC_BOOTSTRAP_SERVERS=self.a.bootstrap)
        cmd = [self.a.bin, "--json", "--partitions", str(self.a.partitions), "run",
               "--role", self.role, "--member", member,
               "--lease-duration", f"{self.a.lease_ms}ms", "--renew-interval", f"{self.a.renew_ms}ms",
               "--challenge-stagger", f"{self.a.stagger_ms}ms", "--grace", f"{self.a.grace_ms}ms",
               "--again", "--", "bash", "-c", WORKERS, self.work]
        log = open(os.path.join(self.dir, f"{member}.events"), "a", encoding="utf-8")
        self.procs[member] = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=log)
        log.close()

    def elections(self):
        """Every `elected` event of every member: (term, member, at_ms, child pid)."""
        out = []
        for member in self.procs:
            for v in self.events_of(member):
                if v["event"] == "elected":
                    out.append((int(v["term"]), member, int(v["at_ms"]), int(v.get("pid", 0))))
        return sorted(out)

    def wait_for(self, what, cond, seconds=60.0):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            got = cond()
            if got:
                return got
            time.sleep(0.05)
        raise TimeoutError(f"timed out after {seconds:.0f} s waiting for {what}")

    def leader_after(self, term):
        """The first election with a term above `term`, once it happened."""
        later = [e for e in self.elections() if e[0] > term]
        return later[0] if later else None

    def working(self, term):
        return any(w[1] == term for w in work_lines(self.work))

    def fault(self, kind, leader):
        term, member, _, child = leader
        proc = self.procs[member]
        at = int(time.time() * 1000)
        self.faults.append((kind, member, term, at))
        say(f"fault {len(self.faults)}: {kind} of {member} (term {term})")
        if kind == "sigterm-supervisor":
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
            self.start(member)
        elif kind == "sigkill-child":
            os.kill(child, signal.SIGKILL)
        else:
            os.kill(child, signal.SIGTERM)

    def run(self):
        subprocess.run([self.a.bin, "topic", "create", "--partitions", str(self.a.partitions)],
                       env=dict(os.environ, KC_BOOTSTRAP_SERVERS=self.a.bootstrap),
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        for i in range(self.a.members):
            self.start(f"m{i}")
        started = time.monotonic()
        leader = self.wait_for("the first election", lambda: self.leader_after(-1))
        while len(self.faults) < self.a.faults:
            if self.a.max_seconds and time.monotonic() - started > self.a.max_seconds:
                say(f"--max-seconds {self.a.max_seconds} reached")
                break
            self.wait_for(f"work of term {leader[0]}", lambda: self.working(leader[0]))
            time.sleep(self.rng.uniform(0.1, 0.6))
            self.fault(self.rng.choice(FAULTS), leader)
            leader = self.wait_for(f"a term after {leader[0]}",
                                   lambda t=leader[0]: self.leader_after(t))
        # A last unit of work of the final term, then every supervisor is stopped.
        self.wait_for(f"work of term {leader[0]}", lambda: self.working(leader[0]))
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            proc.wait(timeout=60)
        return time.monotonic() - started

    def check(self, seconds):
        elections = self.elections()
        terms = [e[0] for e in elections]
        elected_at = {e[0]: e[2] for e in elections}
        lines = work_lines(self.work)
        violations = []
        units = {}
        last_work = {}
        for member, term, at, pid in lines:
            units[term] = units.get(term, 0) + 1
            last_work[term] = max(last_work.get(term, 0), at)
            later = [t for t in terms if t > term]
            if later and at >= elected_at[later[0]]:
                violations.append(f"{member} worked for term {term} at {at}, after term "
                                  f"{later[0]} was elected at {elected_at[later[0]]} (pid {pid})")
        for pid in sorted({line[3] for line in lines}):
            if alive(pid):
                violations.append(f"worker {pid} is still alive after every supervisor exited")
        gaps = sorted(elected_at[b] - last_work[a]
                      for a, b in zip(terms, terms[1:]) if a in last_work)
        by_kind = {k: sum(1 for f in self.faults if f[0] == k) for k in FAULTS}
        print(f"supervisor scenario, seed {self.a.seed}, role {self.role}, {seconds:.0f} s")
        print(f"  faults: {len(self.faults)} ({', '.join(f'{k} {n}' for k, n in by_kind.items())})")
        print(f"  terms: {len(terms)}; units of work: {len(lines)}; workers: "
              f"{len({line[3] for line in lines})}")
        if gaps:
            print(f"  last work of a term to the next election: median {gaps[len(gaps) // 2]} ms, "
                  f"max {gaps[-1]} ms")
        print(f"  units of work of a term after its successor's election: "
              f"{sum(1 for v in violations if 'worked for' in v)}")
        for v in violations[:20]:
            print(f"  VIOLATION: {v}")
        ok = not violations and len(self.faults) >= self.a.faults
        print(f"  verdict: {'PASS' if ok else 'FAIL'}")
        return ok

    def cleanup(self):
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        for pid in {line[3] for line in work_lines(self.work)}:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bin", required=True, help="the kafka-coordination binary")
    p.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP", ""))
    p.add_argument("--faults", type=int, default=12)
    p.add_argument("--seed", type=int, default=int(time.time()) % 1000000)
    p.add_argument("--members", type=int, default=3)
    p.add_argument("--partitions", type=int, default=16)
    p.add_argument("--lease-ms", type=int, default=2000)
    p.add_argument("--renew-ms", type=int, default=500)
    p.add_argument("--stagger-ms", type=int, default=300)
    p.add_argument("--grace-ms", type=int, default=1000)
    p.add_argument("--max-seconds", type=int, default=0)
    p.add_argument("--dir", default="")
    a = p.parse_args()
    if not a.bootstrap:
        p.error("--bootstrap HOST:PORT (or KAFKA_BOOTSTRAP) is required")
    if a.faults < 1 or a.members < 2:
        p.error("--faults must be at least 1 and --members at least 2")
    if not os.access(a.bin, os.X_OK):
        p.error(f"--bin {a.bin} is not an executable")
    a.dir = a.dir or os.path.join(".kafka", "chaos-supervisor", f"{a.seed}-{int(time.time())}")
    say(f"seed {a.seed}, {a.members} supervisors, {a.faults} faults; files in {a.dir}")
    s = Scenario(a)
    try:
        seconds = s.run()
        ok = s.check(seconds)
    except (TimeoutError, subprocess.TimeoutExpired) as e:
        say(f"FAIL: {e}")
        ok = False
    finally:
        s.cleanup()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
