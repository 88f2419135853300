//! [`OnPool`]: a blocking transport behind the completion seam, its calls on a bounded pool.

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use kafka_coordination::core::record::Role;
use kafka_coordination::error::TransportError;
use kafka_coordination::memory::{MemoryBroker, MemoryTransport};
use kafka_coordination::transport::{BlockingTransport, OnPool, Wait};
use kafka_coordination::transport::{Coordinator, ReadBatch, StateReader};
use kafka_coordination::{blocking, FencingToken, LeadershipStatus, ManualClock, Options};

/// A blocking transport: the memory broker's calls, each waited for on the calling thread,
/// and a gate that holds every acquire while it is closed (counting those held).
struct Gated {
    inner: MemoryTransport,
    gate: Arc<Gate>,
}

#[derive(Default)]
struct Gate {
    state: Mutex<GateState>,
    moved: Condvar,
}

#[derive(Default)]
struct GateState {
    open: bool,
    running: usize,
    most_running: usize,
}

impl Gate {
    fn pass(&self) {
        let mut st = self.state.lock().unwrap();
        st.running += 1;
        st.most_running = st.most_running.max(st.running);
        self.moved.notify_all();
        while !st.open {
            st = self.moved.wait(st).unwrap();
        }
        st.running -= 1;
    }

    /// Waits (at most a minute of real time) until `n` acquires are held at the gate.
    fn wait_running(&self, n: usize) -> usize {
        let guard = std::time::Instant::now() + Duration::from_secs(60);
        let mut st = self.state.lock().unwrap();
        while st.running < n && std::time::Instant::now() < guard {
            st = self
                .moved
                .wait_timeout(st, Duration::from_millis(100))
                .unwrap()
                .0;
        }
        st.running
    }

    fn open(&self) {
        self.state.lock().unwrap().open = true;
        self.moved.notify_all();
    }
}

impl BlockingTransport for Gated {
    fn partitions(&self) -> i32 {
        self.inner.partitions()
    }
    fn acquire_epoch(
        &self,
        role: &Role,
        timeout: Duration,
    ) -> Result<FencingToken, TransportError> {
        self.gate.pass();
        self.inner.acquire_epoch(role, timeout)
    }
    fn describe_epoch(&self, role: &Role) -> Result<LeadershipStatus, TransportError> {
        self.inner.describe_epoch(role)
    }
    fn read_partition(
        &self,
        p: i32,
        from: i64,
        wait: Duration,
    ) -> Result<ReadBatch, TransportError> {
        self.inner.read_partition(p, from, wait)
    }
    fn can_long_poll(&self) -> bool {
        true
    }
    fn append(&self, p: i32, key: &[u8], value: Option<&[u8]>) -> Result<i64, TransportError> {
        self.inner.append(p, key, value)
    }
    fn write_lease(
        &self,
        p: i32,
        key: &[u8],
        value: Option<&[u8]>,
        token: FencingToken,
    ) -> Result<i64, TransportError> {
        self.inner.write_lease(p, key, value, token)
    }
    fn claim_role(&self, role: &Role) -> Result<(), TransportError> {
        self.inner.claim_role(role)
    }
    fn release_role(&self, role: &Role) {
        self.inner.release_role(role)
    }
    fn claims_scope(&self) -> Option<usize> {
        self.inner.claims_scope()
    }
}

fn gated(broker: &MemoryBroker, name: &str, open: bool) -> Gated {
    let gate = Arc::new(Gate::default());
    if open {
        gate.open();
    }
    Gated {
        inner: broker.transport(name),
        gate,
    }
}

fn role(name: &str) -> Role {
    Role::new(name).unwrap()
}

/// Five acquires started on a pool of two threads: two run (held at the gate), three queue;
/// once the gate opens every one is answered, and no more than two ever ran at once.
#[test]
fn calls_beyond_the_pool_queue_and_all_are_answered() {
    let broker = MemoryBroker::new(4, Arc::new(ManualClock::default()));
    let transport = OnPool::new(gated(&broker, "a", false), 2);
    let gate = Arc::clone(&transport.get_ref().gate);
    let (tx, rx) = std::sync::mpsc::channel();
    for i in 0..5 {
        let tx = tx.clone();
        transport.start_acquire_epoch(
            role(&format!("role-{i}")),
            Duration::from_secs(10),
            i,
            Box::new(move |granted| {
                let _ = tx.send(granted);
            }),
        );
    }
    assert_eq!(gate.wait_running(2), 2, "two calls run");
    assert_eq!(transport.queued(), 3, "three wait for a thread");
    gate.open();
    for _ in 0..5 {
        let granted = rx.recv_timeout(Duration::from_secs(60)).expect("answered");
        granted.expect("acquired");
    }
    assert_eq!(gate.state.lock().unwrap().most_running, 2);
}

/// One thread, held by a first call: the calls queued behind it go smallest priority first.
#[test]
fn queued_calls_go_smallest_priority_first() {
    let broker = MemoryBroker::new(4, Arc::new(ManualClock::default()));
    let transport = OnPool::new(gated(&broker, "a", false), 1);
    let gate = Arc::clone(&transport.get_ref().gate);
    let order = Arc::new(Mutex::new(Vec::new()));
    let (tx, rx) = std::sync::mpsc::channel();
    for (name, priority) in [("first", 0), ("late", 30), ("soon", 10), ("middle", 20)] {
        let (order, tx) = (Arc::clone(&order), tx.clone());
        transport.start_acquire_epoch(
            role(name),
            Duration::from_secs(10),
            priority,
            Box::new(move |granted| {
                granted.expect("acquired");
                order.lock().unwrap().push(name);
                let _ = tx.send(());
            }),
        );
        if name == "first" {
            assert_eq!(gate.wait_running(1), 1, "the first call holds the thread");
        }
    }
    gate.open();
    for _ in 0..4 {
        rx.recv_timeout(Duration::from_secs(60)).expect("answered");
    }
    assert_eq!(*order.lock().unwrap(), ["first", "soon", "middle", "late"]);
}

/// A blocking transport runs an election through its pool: `a` is elected, `b` waits, `a`
/// resigns and `b` is elected with a newer pair; a lease write with `a`'s pair is fenced.
#[test]
fn a_blocking_transport_on_a_pool_elects_and_hands_over() {
    let clock = ManualClock::default();
    let broker = MemoryBroker::new(4, Arc::new(clock.clone()));
    let options = || Options::new().clock(clock.clone());
    let a = blocking::start(
        OnPool::new(gated(&broker, "a", true), 2),
        "jobs",
        "a",
        options(),
    )
    .expect("a starts");
    clock.settle().expect("settles");
    let a = a.elected_blocking().expect("a is elected");
    let b_transport = OnPool::new(gated(&broker, "b", true), 2);
    let b = blocking::start(b_transport.clone(), "jobs", "b", options()).expect("b starts");
    clock.settle().expect("settles");
    assert!(b.snapshot().token.is_none(), "b waits while a leads");
    let old = a.token();
    a.resign_blocking().expect("a resigns");
    for _ in 0..20 {
        if b.snapshot().token.is_some() {
            break;
        }
        clock
            .advance_and_settle(Duration::from_secs(1))
            .expect("settles");
    }
    let b = b.elected_blocking().expect("b is elected");
    assert_ne!(b.token(), old);
    let fenced = b_transport.write_lease(0, b"k", Some(b"v"), old);
    assert!(fenced.is_err_and(|e| e.is_fenced()));
    b.resign_blocking().expect("b resigns");
}
