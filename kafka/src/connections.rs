//! The process's connections: a few per broker, opened on demand, the connection threads
//! that run requests by priority, and the broker that went silent.

use std::collections::HashMap;
use std::net::{Shutdown, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kafka_protocol::protocol::StrBytes;

use crate::net::conn::{ApiCounts, Conn, NetError, SessionDue, CANNOT_CONNECT};
use crate::security::Security;
use crate::task_runtime::oneshot;
use kafka_coordination_transport::lock::lock;
use kafka_coordination_transport::thread_pool::{Job, Placed};

/// The connections to one broker: up to `per_broker` of them, and the calls that hold them.
struct Broker {
    slots: Box<[Mutex<Option<Conn>>]>,
    /// The call holding each slot; `None`: free.
    calls: Mutex<Vec<Option<Call>>>,
    /// Signalled when a slot is given back.
    freed: std::sync::Condvar,
    /// Signalled when a check of whether the broker is busy ends.
    checked: std::sync::Condvar,
    /// What the pool last learned by opening a new connection to the broker when it seemed
    /// silent (see [`Pool::check_busy`]).
    busy: Mutex<BusyCheck>,
    /// The broker's connection threads, which run the requests handed over with
    /// [`Pool::request`].
    threads: kafka_coordination_transport::thread_pool::Pool,
}

/// Now, in milliseconds since the Unix epoch: the priority of a request whose call was started
/// without one (a host's priorities are its clock's milliseconds).
fn now_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// A call holding one of a broker's connection slots.
struct Call {
    /// When it took the slot.
    since: Instant,
    /// The socket its request is in flight on, once sent.
    socket: Option<Arc<TcpStream>>,
    /// Why the pool gave up on its request: the broker went silent while it was unanswered.
    abandoned: Option<String>,
}

impl Call {
    /// A call that took its slot at `since` and has sent nothing yet.
    fn new(since: Instant) -> Call {
        Call {
            since,
            socket: None,
            abandoned: None,
        }
    }
}

/// Whether a broker whose connections are all stuck answers a new one.
#[derive(Default)]
struct BusyCheck {
    /// When it last did: the pile-up time counts again from then.
    answered_at: Option<Instant>,
    /// A call is opening that connection now; the others wait for what it finds.
    checking: bool,
}

impl Broker {
    fn new(per_broker: usize) -> Broker {
        Broker {
            slots: (0..per_broker).map(|_| Mutex::new(None)).collect(),
            calls: Mutex::new((0..per_broker).map(|_| None).collect()),
            freed: std::sync::Condvar::new(),
            checked: std::sync::Condvar::new(),
            busy: Mutex::default(),
            threads: kafka_coordination_transport::thread_pool::Pool::new("kc-conn", per_broker),
        }
    }

    /// Whether every slot has had its request in flight for at least `pile_up`, and the
    /// broker has not answered a new connection for as long, the rule by which a broker that
    /// stopped answering is found silent (see [`Pool::take`]): `Ok` if so, otherwise the
    /// earliest instant it could be.
    fn stuck(
        &self,
        calls: &[Option<Call>],
        now: Instant,
        pile_up: Duration,
    ) -> Result<(), Instant> {
        if calls.iter().any(Option::is_none) {
            return Err(now + pile_up);
        }
        let answered_at = lock(&self.busy).answered_at;
        let youngest = calls
            .iter()
            .flatten()
            .map(|c| c.since)
            .chain(answered_at)
            .max()
            .unwrap_or(now);
        let stuck_at = youngest + pile_up;
        if now >= stuck_at {
            Ok(())
        } else {
            Err(stuck_at)
        }
    }

    /// Notes that the call holding slot `index` sends its request on `socket`; `Err(why)`
    /// when the pool has already given up on it.
    fn sending(&self, index: usize, socket: Option<&Arc<TcpStream>>) -> Result<(), String> {
        let mut calls = lock(&self.calls);
        let Some(call) = calls[index].as_mut() else {
            return Ok(());
        };
        if let Some(why) = &call.abandoned {
            return Err(why.clone());
        }
        call.socket = socket.cloned();
        Ok(())
    }

    /// Notes that the call holding slot `index` is done with its request: why the pool gave
    /// up on it, if it did.
    fn sent(&self, index: usize) -> Option<String> {
        let mut calls = lock(&self.calls);
        let call = calls[index].as_mut()?;
        call.socket = None;
        call.abandoned.take()
    }

    /// Gives up on every request unanswered for at least `unanswered` (the broker went
    /// silent: `why`): each call is marked, and its socket shut down, so that the thread
    /// waiting for its answer is free at once instead of at the request timeout. Returns how
    /// many requests in flight were cut.
    fn abandon(&self, unanswered: Duration, why: &str) -> usize {
        let now = Instant::now();
        let mut cut = 0;
        for call in lock(&self.calls).iter_mut().flatten() {
            if call.abandoned.is_some() || now.saturating_duration_since(call.since) < unanswered {
                continue;
            }
            call.abandoned = Some(why.to_owned());
            if let Some(socket) = &call.socket {
                // Ends the read (or write) under way in the call's thread; an error here means
                // the socket is closed already, which ends it as well.
                let _ = socket.shutdown(Shutdown::Both);
                cut += 1;
            }
        }
        cut
    }
}

/// Gives a taken slot back when the call is done with it.
struct Taken<'a> {
    broker: &'a Broker,
    index: usize,
}

impl Drop for Taken<'_> {
    fn drop(&mut self) {
        lock(&self.broker.calls)[self.index] = None;
        self.broker.freed.notify_one();
    }
}

/// How long the pool sends nothing to a broker that went silent, but for one probe at a time.
pub(crate) const QUIET_PERIOD: Duration = Duration::from_secs(1);

/// The shortest wait for a connection after which a broker whose every connection has had a
/// request in flight that long is taken for silent (a quarter of the request timeout, at
/// least this).
const MIN_PILE_UP: Duration = Duration::from_secs(1);

/// A broker that went silent: it refused a connection, or left a request unanswered for a
/// whole request timeout.
struct Silent {
    /// Why, for the errors of the calls turned away.
    why: String,
    /// Until when calls are turned away without a probe.
    until: Instant,
    /// A call is probing the broker now: the others are turned away until it is done.
    probing: bool,
}

/// The process's connections: up to `per_broker` per broker address, opened on demand.
///
/// A broker that goes silent (frozen, or behind a network cut: its requests wait out the
/// request timeout, and so does every call queued for its connections) is left alone for
/// [`QUIET_PERIOD`], then probed by one call at a time until it answers: the other calls for
/// it fail at once, as retriable I/O errors, and look for the partition's or the role's new
/// leader or coordinator instead of each waiting out a request timeout of its own while the
/// threads that run them wait too. A broker is silent when it refused a connection, left a
/// request unanswered for a whole request timeout, or left every one of its connections
/// unanswered for the pile-up time (a quarter of the request timeout) while another call
/// waited for one; in the last two cases, only if it does not open a new connection within
/// the pile-up time either. One that does is busy, not silent (an append waiting for a
/// replica that died, see [`busy`](Pool::busy)), and its calls go on. When it goes silent,
/// the pool also gives up on its requests that have been unanswered for the pile-up time: their sockets are shut down, and the calls that wait for
/// them fail at once (retriable, their outcome unknown, as after a request timeout) instead
/// of holding their threads until the request timeout.
pub(crate) struct Pool {
    security: Security,
    client_id: StrBytes,
    conns: Mutex<HashMap<String, Arc<Broker>>>,
    per_broker: usize,
    /// Requests sent (each use of a connection).
    requests: std::sync::atomic::AtomicU64,
    /// Requests sent, by API.
    counts: Arc<ApiCounts>,
    /// The longest a request waits for its answer; a broker that leaves one unanswered that
    /// long is silent.
    request_timeout: Duration,
    quiet_period: Duration,
    /// How long a call waits for one of a broker's connections while every one of them has
    /// had its request in flight at least that long: then the broker is silent.
    pile_up: Duration,
    silent: Mutex<HashMap<String, Silent>>,
    /// Requests given up on when their broker went silent.
    abandoned: std::sync::atomic::AtomicU64,
    /// SASL sessions renewed on their connection (KIP-368), and connections replaced because
    /// theirs was too close to its end.
    reauthentications: std::sync::atomic::AtomicU64,
    sessions_ended: std::sync::atomic::AtomicU64,
    /// Tests: told of every call admitted.
    #[cfg(test)]
    admitted: Mutex<Option<std::sync::mpsc::Sender<()>>>,
}

/// What [`Pool::admit`] decided for a call.
enum Admission {
    /// The broker is not silent.
    Send,
    /// The broker is silent and this call probes it.
    Probe,
}

/// What a call learned of its broker's silence.
enum Heard {
    /// The broker answered (a `Stop` is a decision about its answer, or a setting).
    Answered,
    /// The broker refused the connection, or left the request unanswered for a whole
    /// request timeout: why.
    Silent(String),
    /// The call ended for a reason of its own (its deadline, a malformed answer): nothing
    /// is decided.
    Undecided,
}

impl Pool {
    pub(crate) fn new(
        security: Security,
        client_id: impl Into<String>,
        per_broker: usize,
        request_timeout: Duration,
    ) -> Pool {
        Pool {
            security,
            client_id: StrBytes::from_string(client_id.into()),
            conns: Mutex::new(HashMap::new()),
            per_broker: per_broker.max(1),
            requests: std::sync::atomic::AtomicU64::new(0),
            counts: Arc::default(),
            request_timeout,
            quiet_period: QUIET_PERIOD,
            pile_up: (request_timeout / 4).max(MIN_PILE_UP),
            silent: Mutex::new(HashMap::new()),
            abandoned: std::sync::atomic::AtomicU64::new(0),
            reauthentications: std::sync::atomic::AtomicU64::new(0),
            sessions_ended: std::sync::atomic::AtomicU64::new(0),
            #[cfg(test)]
            admitted: Mutex::new(None),
        }
    }

    /// Whether a call may go to `addr` now: an error that says why not when the broker is
    /// silent and it is not this call's turn to probe it.
    fn admit(&self, addr: &str) -> Result<Admission, NetError> {
        let mut silent = lock(&self.silent);
        let Some(s) = silent.get_mut(addr) else {
            return Ok(Admission::Send);
        };
        if s.probing || Instant::now() < s.until {
            return Err(NetError::Io(format!(
                "not sending to {addr}, which went silent ({}); one call at a time probes it",
                s.why
            )));
        }
        s.probing = true;
        Ok(Admission::Probe)
    }

    /// Why `addr` is silent, if it is.
    fn silent_why(&self, addr: &str) -> Option<String> {
        lock(&self.silent).get(addr).map(|s| s.why.clone())
    }

    /// Whether `addr` is silent now (see [`Pool`]) and has not answered since.
    pub(crate) fn is_silent(&self, addr: &str) -> bool {
        lock(&self.silent).contains_key(addr)
    }

    /// Notes what a call admitted as `admission` heard of `addr`: silence starts (again) a
    /// quiet period and gives up on the broker's requests unanswered for the pile-up time, an
    /// answer ends it, and a probe that decided nothing lets the next call probe.
    fn note(&self, addr: &str, admission: &Admission, heard: Heard) {
        let mut silent = lock(&self.silent);
        match heard {
            Heard::Silent(why) => {
                silent.insert(
                    addr.to_owned(),
                    Silent {
                        why: why.clone(),
                        until: Instant::now() + self.quiet_period,
                        probing: false,
                    },
                );
                drop(silent);
                let broker = lock(&self.conns).get(addr).cloned();
                if let Some(broker) = broker {
                    broker.abandon(self.pile_up, &why);
                }
            }
            Heard::Answered => {
                silent.remove(addr);
            }
            Heard::Undecided => {
                if let (Admission::Probe, Some(s)) = (admission, silent.get_mut(addr)) {
                    s.probing = false;
                }
            }
        }
    }

    /// Runs `f` with the connection to `addr`, opening it when needed. An `Io` failure drops
    /// the connection (the next call opens a new one). A silent broker's calls fail at once
    /// (see [`Pool`]).
    pub(crate) fn with<T>(
        &self,
        addr: &str,
        deadline: Instant,
        f: impl FnOnce(&mut Conn) -> Result<T, NetError>,
    ) -> Result<T, NetError> {
        let admission = self.admit(addr)?;
        #[cfg(test)]
        if let Some(tx) = lock(&self.admitted).as_ref() {
            let _ = tx.send(());
        }
        let (result, heard) = self.send(addr, &admission, deadline, f);
        self.note(addr, &admission, heard);
        result
    }

    /// [`with`](Self::with) once the call is admitted; also what it heard of the broker.
    fn send<T>(
        &self,
        addr: &str,
        admission: &Admission,
        deadline: Instant,
        f: impl FnOnce(&mut Conn) -> Result<T, NetError>,
    ) -> (Result<T, NetError>, Heard) {
        let broker = self.broker(addr);
        let taken = match self.take(&broker, addr, deadline) {
            Ok(taken) => taken,
            Err((e, heard)) => return (Err(e), heard),
        };
        let mut guard = lock(&broker.slots[taken.index]);
        // The broker may have gone silent since this call was admitted (the call ahead of it
        // on the connection waited out a request timeout): it is not sent into the silence.
        if let (Admission::Send, Some(why)) = (admission, self.silent_why(addr)) {
            return (
                Err(NetError::Io(format!(
                    "not sending to {addr}, which went silent while this call waited for a \
                     connection ({why})"
                ))),
                Heard::Undecided,
            );
        }
        if guard
            .as_ref()
            .is_some_and(|c| c.session_due(Instant::now()) == SessionDue::Reopen)
        {
            // Its SASL session ends before a re-authentication could be sure to reach the
            // broker, which closes the connection at the first request after that: replaced.
            *guard = None;
            self.sessions_ended
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        if guard.is_none() {
            // Connecting and the handshake get a request timeout, not the whole call's.
            let open_by = deadline.min(Instant::now() + self.request_timeout);
            let started = Instant::now();
            let opened = self.security.open(
                addr,
                &self.client_id,
                Arc::clone(&self.counts),
                open_by,
                |socket| broker.sending(taken.index, Some(socket)),
            );
            if let Some(why) = broker.sent(taken.index) {
                // Given up on while connecting: whatever came of it, the socket is shut down.
                self.abandoned
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let e = match opened {
                    Err(NetError::Stop(e)) => NetError::Stop(e),
                    _ => NetError::Io(format!(
                        "gave up connecting to {addr} after {:?}: it went silent ({why})",
                        started.elapsed()
                    )),
                };
                return (Err(e), Heard::Undecided);
            }
            *guard = Some(match opened {
                Ok(mut conn) => {
                    conn.request_cap = Some(self.request_timeout);
                    conn
                }
                // Refused, or no answer within a request timeout: the broker is silent.
                Err(NetError::Io(why))
                    if why.starts_with(CANNOT_CONNECT)
                        || started.elapsed() >= self.request_timeout =>
                {
                    return (Err(NetError::Io(why.clone())), Heard::Silent(why));
                }
                Err(e @ NetError::Io(_)) => return (Err(e), Heard::Undecided),
                Err(e @ NetError::Stop(_)) => return (Err(e), Heard::Answered),
            });
        }
        let Some(conn) = guard.as_mut() else {
            return (
                Err(NetError::Io(format!("no connection to {addr}"))),
                Heard::Undecided,
            );
        };
        if let Err(why) = broker.sending(taken.index, conn.socket.as_ref()) {
            return (
                Err(NetError::Io(format!(
                    "not sending to {addr}, which went silent while this call connected to it \
                     ({why})"
                ))),
                Heard::Undecided,
            );
        }
        self.requests
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let started = Instant::now();
        // KIP-368: a session past 85% of its lifetime is renewed before the request.
        let renewed = if conn.session_due(started) == SessionDue::Reauthenticate {
            self.reauthentications
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.security.authenticate(conn, deadline)
        } else {
            Ok(())
        };
        let renewal_failed = renewed.is_err();
        let mut result = match renewed {
            Ok(()) => f(conn),
            Err(e) => Err(e),
        };
        let abandoned = broker.sent(taken.index);
        if abandoned.is_some() || renewal_failed {
            // Its socket was shut down, or the broker refused to renew its session: the
            // connection cannot serve another request.
            *guard = None;
        }
        let heard = match (&result, abandoned) {
            (Err(NetError::Io(_)), Some(why)) => {
                self.abandoned
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                result = Err(NetError::Io(format!(
                    "gave up waiting for an answer from {addr} after {:?}: it went silent \
                     ({why})",
                    started.elapsed()
                )));
                Heard::Undecided
            }
            (Err(NetError::Io(why)), None) => {
                *guard = None;
                drop(guard);
                // A request left unanswered for a whole request timeout: the broker is silent,
                // unless it answers a new connection at once.
                if started.elapsed() < self.request_timeout {
                    Heard::Undecided
                } else if self.check_busy(&broker, addr) {
                    result = Err(NetError::Io(format!(
                        "{why}; {addr} answered a new connection, so it is busy, not silent"
                    )));
                    Heard::Undecided
                } else {
                    Heard::Silent(why.clone())
                }
            }
            _ => Heard::Answered,
        };
        (result, heard)
    }

    /// Whether `addr`, which left a request unanswered for a whole request timeout, opens a new
    /// connection (TCP, ApiVersions, and the SASL handshake when configured) within the
    /// pile-up time: a broker that does is busy with that request, not silent. A coordinator's
    /// append (AddPartitionsToTxn, EndTxn) or a Produce with acks=all waits for every replica
    /// in the ISR, and a replica whose broker died stays there until the controller fences
    /// that broker (its session timeout, 9 s by default): the request is answered then, and
    /// the broker serves every call of the role's that follows. Taking it for silent would
    /// turn those calls away for a quiet period and more, time a leader needs to renew. A
    /// frozen broker, or one behind a network cut, does not answer the new connection either.
    /// Called through [`check_busy`](Self::check_busy), one call at a time per broker.
    fn busy(&self, addr: &str) -> bool {
        self.security
            .open(
                addr,
                &self.client_id,
                Arc::clone(&self.counts),
                Instant::now() + self.pile_up,
                |_| Ok(()),
            )
            .is_ok()
    }

    /// Takes a free connection slot of `broker` (at `addr`), waiting for one until `deadline`.
    /// A call that has waited while every slot's request has been in flight for the pile-up
    /// time finds the broker silent: a broker that answers gives a slot back within
    /// milliseconds, one that stopped answering holds them until the request timeout, and the
    /// calls queued meanwhile would hold their threads that long too.
    fn take<'b>(
        &self,
        broker: &'b Broker,
        addr: &str,
        deadline: Instant,
    ) -> Result<Taken<'b>, (NetError, Heard)> {
        let mut calls = lock(&broker.calls);
        loop {
            let now = Instant::now();
            if let Some(index) = calls.iter().position(Option::is_none) {
                calls[index] = Some(Call::new(now));
                return Ok(Taken { broker, index });
            }
            // Every slot is taken: stuck once the youngest request on them is that old.
            let stuck_at = match broker.stuck(&calls, now, self.pile_up) {
                Ok(()) => {
                    drop(calls);
                    if self.check_busy(broker, addr) {
                        calls = lock(&broker.calls);
                        continue;
                    }
                    let why = self.pile_up_why(addr);
                    return Err((
                        NetError::Io(format!("not sending to {addr}: {why}")),
                        Heard::Silent(why),
                    ));
                }
                Err(at) => at,
            };
            if now >= deadline {
                return Err((
                    NetError::Io(format!(
                        "timed out waiting for a connection to {addr} (all {} in use)",
                        calls.len()
                    )),
                    Heard::Undecided,
                ));
            }
            let wait = stuck_at.min(deadline) - now;
            calls = broker
                .freed
                .wait_timeout(calls, wait)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
    }

    /// The connections to `addr` (an entry made on first use).
    fn broker(&self, addr: &str) -> Arc<Broker> {
        Arc::clone(
            lock(&self.conns)
                .entry(addr.to_owned())
                .or_insert_with(|| Arc::new(Broker::new(self.per_broker))),
        )
    }

    /// Why a broker whose connections all had a request unanswered for the pile-up time is
    /// taken for silent.
    fn pile_up_why(&self, addr: &str) -> String {
        format!(
            "every connection to {addr} has had a request unanswered for over {:?} while other \
             calls waited for one",
            self.pile_up
        )
    }

    /// [`with`](Self::with), run on one of `addr`'s connection threads instead of the
    /// caller's: returns at once, and the answer arrives on the receiver. The caller holds no
    /// thread while the request waits for a connection or for its answer. (Under
    /// [`block_on`](crate::task_runtime::block_on), whose thread waits anyway, it runs there, at once.)
    ///
    /// Each broker has up to `per_broker` connection threads (a [`kafka_coordination_transport::thread_pool::Pool`]: started
    /// when requests are queued and none is free, ended after [`kafka_coordination_transport::thread_pool::IDLE`] without
    /// one), which take the queued request of the smallest priority first. The first request
    /// made on one of the broker's own connection threads while it hands over an answer (the
    /// next step of the call it resumed) runs on that thread next, without waking another
    /// ([`kafka_coordination_transport::thread_pool::Pool::follow_up`]). A request that waits in the queue while every
    /// connection of its broker has had a request unanswered for the pile-up time finds the
    /// broker silent, as a blocking call waiting for a connection does. A request whose
    /// deadline passed while it was queued is not sent.
    pub(crate) fn request<T: Send + 'static>(
        self: &Arc<Self>,
        addr: &str,
        deadline: Instant,
        f: impl FnOnce(&mut Conn) -> Result<T, NetError> + Send + 'static,
    ) -> oneshot::Receiver<Result<T, NetError>> {
        let (tx, rx) = oneshot::channel();
        if crate::task_runtime::inline() {
            // A blocking call: its thread waits anyway, so the request runs on it.
            let _ = tx.send(self.with(addr, deadline, f));
            return rx;
        }
        let pool = Arc::downgrade(self);
        let owned = addr.to_owned();
        let job: Job = Box::new(move || {
            // The receiver may be gone (its call dropped): the answer then has no one to go to.
            let answer = match pool.upgrade() {
                None => Err(NetError::Io(format!(
                    "not sending to {owned}: the client was dropped"
                ))),
                Some(_) if Instant::now() >= deadline => Err(NetError::Io(format!(
                    "timed out waiting for a connection to {owned}"
                ))),
                Some(pool) => pool.with(&owned, deadline, f),
            };
            let _ = tx.send(answer);
        });
        let broker = self.broker(addr);
        let Some(job) = broker.threads.follow_up(job) else {
            return rx;
        };
        let priority = crate::task_runtime::priority().unwrap_or_else(now_millis);
        if broker.threads.submit(priority, job) == Placed::Waits {
            // Every connection thread is busy: if they all stay stuck on unanswered requests,
            // the broker is silent and what waits here should not wait for the request timeout.
            Self::check_pile_up_at(Arc::downgrade(self), addr, Instant::now() + self.pile_up);
        }
        rx
    }

    /// Has [`check_pile_up`](Self::check_pile_up) run for `addr` at `when`.
    fn check_pile_up_at(pool: std::sync::Weak<Pool>, addr: &str, when: Instant) {
        let addr = addr.to_owned();
        crate::task_runtime::at(when, move || {
            if let Some(live) = pool.upgrade() {
                live.check_pile_up(pool, &addr);
            }
        });
    }

    /// Finds `addr` silent when requests wait in its queue while every one of its
    /// connections has had a request unanswered for the pile-up time; looks again when that
    /// could first be, for as long as requests wait and the broker is not silent.
    fn check_pile_up(&self, weak: std::sync::Weak<Pool>, addr: &str) {
        let broker = self.broker(addr);
        if broker.threads.queued() == 0 || self.is_silent(addr) {
            return;
        }
        let stuck = broker.stuck(&lock(&broker.calls), Instant::now(), self.pile_up);
        match stuck {
            // Opening a connection may take the pile-up time: not on the timer's thread.
            Ok(()) => {
                let owned = addr.to_owned();
                let spawned = std::thread::Builder::new()
                    .name("kc-busy-check".into())
                    .spawn(move || {
                        let Some(pool) = weak.upgrade() else { return };
                        if pool.check_busy(&broker, &owned) {
                            let next = Instant::now() + pool.pile_up;
                            Self::check_pile_up_at(weak, &owned, next);
                        } else {
                            let why = pool.pile_up_why(&owned);
                            pool.note(&owned, &Admission::Send, Heard::Silent(why));
                        }
                    });
                if spawned.is_err() {
                    self.note(
                        addr,
                        &Admission::Send,
                        Heard::Silent(self.pile_up_why(addr)),
                    );
                }
            }
            Err(next) => Self::check_pile_up_at(weak, addr, next),
        }
    }

    /// Whether `broker` (at `addr`), which left a request unanswered for a request timeout or
    /// every connection's for the pile-up time, answers a new connection (see
    /// [`busy`](Self::busy)): then the pile-up time counts again from now. One call checks at
    /// a time; the others wait for what it finds.
    fn check_busy(&self, broker: &Broker, addr: &str) -> bool {
        let mut check = lock(&broker.busy);
        if check.checking {
            while check.checking {
                check = broker
                    .checked
                    .wait_timeout(check, self.pile_up)
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .0;
            }
            return check
                .answered_at
                .is_some_and(|at| at.elapsed() < self.pile_up);
        }
        check.checking = true;
        drop(check);
        let busy = self.busy(addr);
        let mut check = lock(&broker.busy);
        check.checking = false;
        if busy {
            check.answered_at = Some(Instant::now());
        }
        drop(check);
        broker.checked.notify_all();
        busy
    }

    /// How many requests were sent on the pool's connections.
    pub(crate) fn requests(&self) -> u64 {
        self.requests.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// How many times a connection authenticated again before a request (KIP-368), and how
    /// many connections were replaced because their SASL session was about to end.
    pub(crate) fn reauthentications(&self) -> (u64, u64) {
        (
            self.reauthentications
                .load(std::sync::atomic::Ordering::Relaxed),
            self.sessions_ended
                .load(std::sync::atomic::Ordering::Relaxed),
        )
    }

    /// How many requests the pool gave up on because their broker went silent.
    pub(crate) fn requests_abandoned(&self) -> u64 {
        self.abandoned.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// How many requests of each API were sent on the pool's connections.
    pub(crate) fn requests_by_api(&self) -> Vec<(i16, u64)> {
        self.counts.sent()
    }

    /// How many connections are open.
    pub(crate) fn open_connections(&self) -> usize {
        let all: Vec<_> = lock(&self.conns).values().cloned().collect();
        all.iter()
            .flat_map(|broker| broker.slots.iter())
            .filter(|s| lock(s).is_some())
            .count()
    }
}

#[cfg(test)]
mod tests;
