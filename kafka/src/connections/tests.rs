use super::*;

fn soon() -> Instant {
    Instant::now() + Duration::from_secs(5)
}

fn io_message(r: Result<impl std::fmt::Debug, NetError>) -> String {
    match r {
        Err(NetError::Io(why)) => why,
        other => panic!("expected an I/O error, got {other:?}"),
    }
}

/// A listener that accepts connections and never answers: a frozen broker. Counts the
/// connections it accepted.
fn frozen_broker() -> (String, Arc<std::sync::atomic::AtomicUsize>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    let addr = listener.local_addr().expect("address").to_string();
    let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = accepted.clone();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            held.push(stream);
        }
    });
    (addr, accepted)
}

/// A slot held since `since` by a call that has sent nothing yet.
fn held_since(since: Instant) -> Option<Call> {
    Some(Call::new(since))
}

fn call_through(pool: &Pool, addr: &str) -> Result<(), NetError> {
    pool.with(addr, Instant::now() + Duration::from_secs(30), |_| Ok(()))
}

/// A broker that leaves the handshake unanswered for a request timeout is silent: the
/// next calls fail at once without connecting, naming it, until the quiet period is over;
/// then one call at a time probes it. A broker that answers is no longer silent.
#[test]
fn a_silent_broker_is_left_alone_and_probed_by_one_call_at_a_time() {
    let (addr, accepted) = frozen_broker();
    let timeout = Duration::from_millis(200);
    let mut pool = Pool::new(Security::plaintext(), "test", 4, timeout);
    pool.quiet_period = Duration::from_secs(3600);
    let first = io_message(call_through(&pool, &addr));
    assert!(!first.contains('\0'), "a clean message: {first:?}");
    assert!(
        first.contains(&format!("reading from {addr}: nothing within")),
        "a socket timeout says what it was: {first}"
    );
    assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 1);
    for _ in 0..3 {
        let why = io_message(call_through(&pool, &addr));
        assert!(why.contains(&format!("not sending to {addr}")), "{why}");
        assert!(
            why.contains(&first) && !why.contains('\0'),
            "names the cause: {why:?}"
        );
    }
    assert_eq!(
        accepted.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "no connection while the broker is silent"
    );

    // The quiet period is over: one call probes (and waits a request timeout), the others
    // are turned away meanwhile.
    lock(&pool.silent).get_mut(&addr).expect("silent").until = Instant::now();
    let probe = std::thread::scope(|scope| {
        let probe = scope.spawn(|| call_through(&pool, &addr));
        while accepted.load(std::sync::atomic::Ordering::SeqCst) < 2 {
            std::thread::yield_now();
        }
        let why = io_message(call_through(&pool, &addr));
        assert!(why.contains("one call at a time probes it"), "{why}");
        probe.join().expect("the probe")
    });
    io_message(probe);
    assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 2);
    assert!(
        io_message(call_through(&pool, &addr)).contains("not sending"),
        "silent again after a probe that got no answer"
    );

    // An answer (here: a call whose connection works) ends the silence.
    let mut live = Pool::new(Security::plaintext(), "test", 1, timeout);
    live.quiet_period = Duration::ZERO;
    live.note(&addr, &Admission::Send, Heard::Silent("test".to_owned()));
    assert!(lock(&live.silent).contains_key(&addr));
    live.note(&addr, &Admission::Send, Heard::Answered);
    assert!(lock(&live.silent).is_empty());
}

/// A call admitted while the broker still answered, that then waited for a connection
/// while the call ahead of it found the broker silent, is not sent into the silence.
#[test]
fn a_call_that_waited_for_a_connection_to_a_broker_gone_silent_is_not_sent() {
    let (addr, accepted) = frozen_broker();
    let pool = Pool::new(Security::plaintext(), "test", 1, Duration::from_secs(3600));
    // The broker's one connection is busy with the call ahead.
    let broker = Arc::new(Broker::new(1));
    lock(&pool.conns).insert(addr.clone(), Arc::clone(&broker));
    let busy = Taken {
        broker: &broker,
        index: 0,
    };
    lock(&broker.calls)[0] = held_since(Instant::now());
    let (tx, rx) = std::sync::mpsc::channel();
    *lock(&pool.admitted) = Some(tx);
    std::thread::scope(|scope| {
        let waiting = scope.spawn(|| call_through(&pool, &addr));
        rx.recv().expect("the call was admitted");
        // The call ahead waited out a request timeout: the broker is silent.
        pool.note(
            &addr,
            &Admission::Send,
            Heard::Silent("no answer within the request timeout".to_owned()),
        );
        drop(busy);
        let why = io_message(waiting.join().expect("the call"));
        assert!(
            why.contains("went silent while this call waited for a connection"),
            "{why}"
        );
        assert!(
            why.contains("no answer within the request timeout"),
            "{why}"
        );
    });
    assert_eq!(
        accepted.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "nothing was sent to the silent broker"
    );
}

/// A call that waits for a connection while every connection of the broker has had its
/// request unanswered for the pile-up time, and that finds the broker does not answer a new
/// connection either, finds the broker silent, sends nothing, and the calls after it are
/// turned away. A wait that ends with the call's own deadline decides nothing.
#[test]
fn calls_piling_up_behind_unanswered_requests_find_the_broker_silent() {
    let (addr, accepted) = frozen_broker();
    let mut pool = Pool::new(Security::plaintext(), "test", 2, Duration::from_secs(3600));
    pool.quiet_period = Duration::from_secs(3600);
    let broker = Arc::new(Broker::new(2));
    lock(&pool.conns).insert(addr.clone(), Arc::clone(&broker));

    // Both connections busy since just now, the pile-up time an hour: the call's own
    // deadline ends its wait, and the broker is not silent.
    *lock(&broker.calls) = vec![held_since(Instant::now()), held_since(Instant::now())];
    let short = pool.with(
        &addr,
        Instant::now() + Duration::from_millis(50),
        |_| Ok(()),
    );
    let why = io_message(short);
    assert!(why.contains("timed out waiting for a connection"), "{why}");
    assert!(!pool.is_silent(&addr));

    // Both busy for longer than the pile-up time, and a new connection gets no answer within
    // it: silent.
    pool.pile_up = Duration::from_millis(200);
    let long_ago = Instant::now() - Duration::from_secs(1);
    *lock(&broker.calls) = vec![held_since(long_ago), held_since(long_ago)];
    let why = io_message(call_through(&pool, &addr));
    assert!(
        why.contains("every connection to") && why.contains("unanswered for over 200ms"),
        "{why}"
    );
    assert!(pool.is_silent(&addr));
    let next = io_message(call_through(&pool, &addr));
    assert!(next.contains("which went silent"), "{next}");
    assert_eq!(
        accepted.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "nothing was sent but the new connection that checked whether the broker is busy"
    );
}

/// A request handed over with `request` runs on a connection thread of its broker, and
/// the task waiting for it resumes there: the caller's thread is free at once. The broker
/// accepts the connection and closes it only once the task waits, so the answer cannot
/// come before the task's first poll, however threads are scheduled.
#[test]
fn a_request_runs_on_a_connection_thread_and_resumes_its_task_there() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    let addr = listener.local_addr().expect("address").to_string();
    let pool = Arc::new(Pool::new(
        Security::plaintext(),
        "test",
        2,
        Duration::from_secs(5),
    ));
    let (tx, rx) = std::sync::mpsc::channel();
    let answer = pool.request(&addr, soon(), |_| Ok(()));
    crate::task_runtime::spawn(async move {
        let outcome = answer.await;
        let on = std::thread::current().name().map(str::to_owned);
        let _ = tx.send((outcome.map(io_message), on));
    });
    // `spawn` returned: the task waits. Now the broker hangs up.
    let (stream, _) = listener.accept().expect("the connection thread connects");
    drop(stream);
    let (why, on) = rx.recv_timeout(Duration::from_secs(60)).expect("answered");
    let why = why.expect("the connection thread answered");
    assert!(why.contains(&addr), "{why}");
    assert_eq!(on.as_deref(), Some("kc-conn"));
}

/// A broker's queued requests go out in the order of their calls' priorities, whatever
/// the order they were queued in (a host gives its queue's due instants).
#[test]
fn queued_requests_go_out_in_the_order_of_their_priorities() {
    let (addr, _) = frozen_broker();
    let pool = Arc::new(Pool::new(
        Security::plaintext(),
        "test",
        1,
        Duration::from_secs(3600),
    ));
    // The only connection thread is busy until this request's deadline: it goes first
    // (the smallest priority), whenever the thread starts.
    let busy = crate::task_runtime::with_priority(i64::MIN, || {
        pool.request(&addr, Instant::now() + Duration::from_secs(1), |_| Ok(()))
    });
    let order = Arc::new(Mutex::new(Vec::new()));
    let (tx, rx) = std::sync::mpsc::channel();
    // Already out of time when their turn comes: each answers at once, in turn.
    let soon = Instant::now() + Duration::from_millis(50);
    for priority in [30i64, 10, 20] {
        let answer =
            crate::task_runtime::with_priority(priority, || pool.request(&addr, soon, |_| Ok(())));
        let (order, tx) = (Arc::clone(&order), tx.clone());
        crate::task_runtime::spawn(async move {
            let _ = answer.await;
            lock(&order).push(priority);
            let _ = tx.send(());
        });
    }
    let _ = crate::task_runtime::block_on(busy);
    for _ in 0..3 {
        rx.recv_timeout(Duration::from_secs(60)).expect("answered");
    }
    assert_eq!(*lock(&order), vec![10, 20, 30]);
}

/// Requests queued for a broker whose every connection has a request unanswered for the
/// pile-up time find the broker silent then, as a blocking call waiting for a connection
/// does, not at the request timeout (an hour here): the request in flight is given up on,
/// and the one queued behind it is not sent.
#[test]
fn requests_queued_behind_unanswered_ones_find_the_broker_silent() {
    let (addr, accepted) = frozen_broker();
    let mut pool = Pool::new(Security::plaintext(), "test", 1, Duration::from_secs(3600));
    pool.quiet_period = Duration::from_secs(3600);
    pool.pile_up = Duration::from_millis(200);
    let pool = Arc::new(pool);
    // Without the pile-up rule, both would wait out this deadline and fail saying so.
    let deadline = Instant::now() + Duration::from_secs(30);
    let first = pool.request(&addr, deadline, |_| Ok(()));
    let queued = pool.request(&addr, deadline, |_| Ok(()));
    let first = io_message(crate::task_runtime::block_on(first).expect("answered"));
    assert!(first.contains("went silent"), "{first}");
    let queued = io_message(crate::task_runtime::block_on(queued).expect("answered"));
    assert!(queued.contains("which went silent"), "{queued}");
    assert!(pool.is_silent(&addr));
    // The first request's connection, and the one that checked whether the broker is busy.
    assert!(accepted.load(std::sync::atomic::Ordering::SeqCst) <= 2);
}

/// When a broker goes silent, the requests it has left unanswered for the pile-up time are
/// given up on: their sockets are shut down, and the calls waiting for their answers fail
/// then, saying why, instead of at the request timeout (an hour here). A call that had
/// not sent its request yet when the pool gave up on it does not send it.
#[test]
fn a_broker_gone_silent_frees_the_calls_waiting_for_its_answers() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    let addr = listener.local_addr().expect("address").to_string();
    let client = TcpStream::connect(&addr).expect("connect");
    // The broker end: accepted, never written to (a frozen broker).
    let (_frozen, _) = listener.accept().expect("accept");
    let mut pool = Pool::new(Security::plaintext(), "test", 1, Duration::from_secs(3600));
    pool.quiet_period = Duration::from_secs(3600);
    pool.pile_up = Duration::from_millis(200);
    let broker = Arc::new(Broker::new(1));
    let mut conn = Conn::over(&addr, Box::new(client.try_clone().expect("socket")));
    conn.socket = Some(Arc::new(client));
    *lock(&broker.slots[0]) = Some(conn);
    lock(&pool.conns).insert(addr.clone(), Arc::clone(&broker));

    let (waiting, turned_away) = std::thread::scope(|scope| {
        let waiting = scope.spawn(|| {
            let deadline = Instant::now() + Duration::from_secs(30);
            pool.with(&addr, deadline, |conn| conn.read_frame(deadline).map(drop))
        });
        // Until the request is in flight on the socket (a wait, not a verdict).
        while lock(&broker.calls)[0]
            .as_ref()
            .is_none_or(|c| c.socket.is_none())
        {
            std::thread::yield_now();
        }
        // This call waits for the one connection, finds every request on it unanswered
        // for the pile-up time, and the broker silent.
        let turned_away = io_message(call_through(&pool, &addr));
        (io_message(waiting.join().expect("the call")), turned_away)
    });
    assert!(
        turned_away.contains("unanswered for over 200ms"),
        "{turned_away}"
    );
    assert!(
        waiting.contains(&format!("gave up waiting for an answer from {addr}"))
            && waiting.contains("went silent")
            && waiting.contains("unanswered for over 200ms"),
        "the waiting call is freed and says why: {waiting}"
    );
    assert_eq!(pool.requests_abandoned(), 1);
    assert!(
        lock(&broker.slots[0]).is_none(),
        "the connection whose socket was shut down is not used again"
    );

    // A call that took a slot but had not sent its request when the broker went silent
    // does not send it.
    let broker = Broker::new(1);
    lock(&broker.calls)[0] = held_since(Instant::now() - Duration::from_secs(1));
    assert_eq!(broker.abandon(Duration::from_millis(200), "frozen"), 0);
    assert_eq!(broker.sending(0, None), Err("frozen".to_owned()));
    // A call younger than the pile-up time is left alone.
    lock(&broker.calls)[0] = held_since(Instant::now());
    broker.abandon(Duration::from_secs(60), "frozen");
    assert_eq!(broker.sending(0, None), Ok(()));
    assert_eq!(broker.sent(0), None);
}

/// A call that fails for its own reasons (a short deadline of its own) does not make the
/// broker silent, and a probe that fails that way lets the next call probe.
#[test]
fn only_a_whole_request_timeout_without_an_answer_makes_a_broker_silent() {
    let (addr, accepted) = frozen_broker();
    let pool = Pool::new(Security::plaintext(), "test", 1, Duration::from_secs(3600));
    let short = pool.with(&addr, Instant::now() + Duration::from_millis(100), |_| {
        Ok(())
    });
    io_message(short);
    assert!(
        lock(&pool.silent).is_empty(),
        "the call's own deadline ran out"
    );
    let refused = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("port");
        let a = l.local_addr().expect("address").to_string();
        drop(l);
        a
    };
    let why = io_message(call_through(&pool, &refused));
    assert!(why.contains("cannot connect"), "{why}");
    assert!(
        lock(&pool.silent).contains_key(&refused),
        "a refused connection makes the broker silent"
    );
    assert!(accepted.load(std::sync::atomic::Ordering::SeqCst) >= 1);
}
