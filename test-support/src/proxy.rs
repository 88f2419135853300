//! A TCP proxy in front of a broker that can hold back the broker's answers to one kind of
//! request (by API key) for longer than the client's request timeout: the request reaches the
//! broker and takes effect, and the client does not learn it in time. It can also hold back
//! requests themselves and send them later, on a connection of their own (a produce queued at a
//! recovering broker that lands after the client gave up on it), turn the broker's Fetch answers
//! into answers with an error code on every partition, as a broker under load or one that has
//! not caught up with a new topic answers, and freeze the broker. It can stamp the records of
//! every Produce it forwards with another time (a member whose clock is off), and keep the
//! broker's answers to one kind of request at a gate until the test opens it.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{
    AddPartitionsToTxnResponse, FetchResponse, ProduceResponse, ResponseHeader,
};
use kafka_protocol::messages::{ProduceRequest, RequestHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion};

/// EndTxn's API key.
pub const END_TXN: i16 = 26;
/// Fetch's API key.
pub const FETCH: i16 = 1;
/// Produce's API key.
pub const PRODUCE: i16 = 0;
/// AddPartitionsToTxn's API key.
pub const ADD_PARTITIONS_TO_TXN: i16 = 24;
/// DescribeProducers' API key.
pub const DESCRIBE_PRODUCERS: i16 = 61;
/// TxnOffsetCommit's API key.
pub const TXN_OFFSET_COMMIT: i16 = 28;
/// DescribeTransactions' API key.
pub const DESCRIBE_TRANSACTIONS: i16 = 65;

/// Requests held back at the proxy instead of sent.
#[derive(Default)]
struct HeldRequests {
    /// Requests with this API key are held from now on.
    api_key: Option<i16>,
    /// The held requests, in the order they came.
    frames: Vec<Vec<u8>>,
    /// When the broker's answer to a request with this API key comes, the held requests are
    /// sent first (each on a connection of its own, its answer awaited), and only then is that
    /// answer passed on.
    release_at: Option<i16>,
    /// How many requests were held in all.
    count: usize,
    /// The answers to the released requests: (error code, base offset) of a Produce answer's
    /// first partition, or `None` when there was no answer.
    answers: Vec<Option<(i16, i64)>>,
}

#[derive(Default)]
struct Hold {
    api_key: i16,
    remaining: usize,
    delay: Duration,
}

/// Which Fetch answers to turn into errors.
#[derive(Default)]
struct Fail {
    remaining: usize,
    code: i16,
}

/// Answers kept at the proxy until the test opens the gate.
#[derive(Default)]
struct Gate {
    /// (answers to requests with this API key wait, how many waited or wait so far)
    state: Mutex<(Option<i16>, usize)>,
    opened: Condvar,
}

impl Gate {
    /// Waits while answers to `api_key` are kept; `true` if this one was kept.
    fn pass(&self, api_key: Option<i16>) -> bool {
        let mut state = self.state.lock().expect("gate");
        if api_key.is_none() || state.0 != api_key {
            return false;
        }
        state.1 += 1;
        self.opened.notify_all();
        while state.0.is_some() && state.0 == api_key {
            state = self.opened.wait(state).expect("gate");
        }
        true
    }
}

/// The proxy; it runs until the test process ends.
pub struct Proxy {
    /// `127.0.0.1:PORT` to connect to instead of the broker.
    pub addr: String,
    hold: Arc<Mutex<Hold>>,
    held: Arc<AtomicUsize>,
    fail: Arc<Mutex<Fail>>,
    failed: Arc<AtomicUsize>,
    forwarded: Arc<Mutex<Vec<i16>>>,
    frozen: Arc<AtomicBool>,
    requests_held: Arc<Mutex<HeldRequests>>,
    gate: Arc<Gate>,
    skew_ms: Arc<AtomicI64>,
    target: String,
}

impl Proxy {
    /// Listens on a free loopback port and forwards every connection to `target`.
    pub fn start(target: &str) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
        let addr = listener.local_addr().expect("local address").to_string();
        let proxy = Proxy {
            addr,
            hold: Arc::default(),
            held: Arc::default(),
            fail: Arc::default(),
            failed: Arc::default(),
            forwarded: Arc::default(),
            frozen: Arc::default(),
            requests_held: Arc::default(),
            gate: Arc::default(),
            skew_ms: Arc::default(),
            target: target.to_owned(),
        };
        let (gate, skew_ms) = (proxy.gate.clone(), proxy.skew_ms.clone());
        let requests_held = proxy.requests_held.clone();
        let (hold, held, fail, failed, forwarded, frozen) = (
            proxy.hold.clone(),
            proxy.held.clone(),
            proxy.fail.clone(),
            proxy.failed.clone(),
            proxy.forwarded.clone(),
            proxy.frozen.clone(),
        );
        let target = target.to_owned();
        thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let Ok(server) = TcpStream::connect(&target) else {
                    continue;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                let pending: Arc<Mutex<VecDeque<(i16, i16)>>> = Arc::default();
                let (c2, s2) = (
                    client.try_clone().expect("clone"),
                    server.try_clone().expect("clone"),
                );
                let (p1, p2, f1) = (pending.clone(), pending, forwarded.clone());
                let (z1, z2) = (frozen.clone(), frozen.clone());
                let (r1, r2) = (requests_held.clone(), requests_held.clone());
                let skew = skew_ms.clone();
                thread::spawn(move || requests(client, server, p1, f1, z1, r1, skew));
                let (h, n) = (hold.clone(), held.clone());
                let (f, fd) = (fail.clone(), failed.clone());
                let release = Release {
                    held: r2,
                    target: target.clone(),
                    gate: gate.clone(),
                };
                thread::spawn(move || responses(s2, c2, p2, h, n, f, fd, z2, release));
            }
        });
        proxy
    }

    /// Holds the broker's next `count` answers to requests with `api_key` for `delay` each
    /// (then drops that connection: the client gave up on it).
    pub fn hold_next(&self, api_key: i16, count: usize, delay: Duration) {
        *self.hold.lock().expect("hold") = Hold {
            api_key,
            remaining: count,
            delay,
        };
    }

    /// Holds every request with `api_key` from now on: it is not sent to the broker (the
    /// client waits for an answer that does not come) until released.
    pub fn hold_requests(&self, api_key: i16) {
        self.requests_held.lock().expect("held requests").api_key = Some(api_key);
    }

    /// Stops holding requests; the ones held so far are sent just before the broker's next
    /// answer to a request with `api_key` reaches the client (each on a connection of its own,
    /// its answer awaited).
    pub fn release_held_requests_before_answer_to(&self, api_key: i16) {
        let mut h = self.requests_held.lock().expect("held requests");
        h.api_key = None;
        h.release_at = Some(api_key);
    }

    /// Stops holding requests and sends the ones held so far now (each on a connection of its
    /// own, its answer awaited).
    pub fn release_held_requests_now(&self) {
        let frames = {
            let mut h = self.requests_held.lock().expect("held requests");
            h.api_key = None;
            h.release_at = None;
            std::mem::take(&mut h.frames)
        };
        send_held(&self.requests_held, &self.target, frames);
    }

    /// Stops holding requests and forgets the ones held so far: they never reach the broker.
    pub fn drop_held_requests(&self) {
        let mut h = self.requests_held.lock().expect("held requests");
        h.api_key = None;
        h.release_at = None;
        h.frames.clear();
    }

    /// How many requests were held so far.
    pub fn requests_held(&self) -> usize {
        self.requests_held.lock().expect("held requests").count
    }

    /// The broker's answers to the released requests, in order: (error code, base offset) of
    /// a Produce answer's first partition, `None` for no answer.
    pub fn released_answers(&self) -> Vec<Option<(i16, i64)>> {
        self.requests_held
            .lock()
            .expect("held requests")
            .answers
            .clone()
    }

    /// Keeps the broker's answers to requests with `api_key` at the proxy from now on (the
    /// requests reach the broker and take effect; the client waits) until [`Proxy::open_gate`].
    pub fn close_gate(&self, api_key: i16) {
        *self.gate.state.lock().expect("gate") = (Some(api_key), 0);
    }

    /// Passes the answers kept at the gate on, and every later one.
    pub fn open_gate(&self) {
        self.gate.state.lock().expect("gate").0 = None;
        self.gate.opened.notify_all();
    }

    /// Waits until `n` answers have been kept at the gate since it closed.
    pub fn wait_at_gate(&self, n: usize) {
        let mut state = self.gate.state.lock().expect("gate");
        while state.1 < n {
            state = self.gate.opened.wait(state).expect("gate");
        }
    }

    /// How many answers have been kept at the gate since it closed.
    pub fn kept_at_gate(&self) -> usize {
        self.gate.state.lock().expect("gate").1
    }

    /// Stamps the records of every Produce forwarded from now on `ms` milliseconds later than
    /// the client did (earlier when negative), as a client whose clock is that far off would
    /// (0: as sent).
    pub fn skew_produce_timestamps(&self, ms: i64) {
        self.skew_ms.store(ms, Ordering::SeqCst);
    }

    /// Freezes the broker as a SIGSTOP would: connections are still accepted, and nothing that
    /// arrives is answered (requests are dropped, and so are the answers to requests sent
    /// before) until [`Proxy::thaw`].
    pub fn freeze(&self) {
        self.frozen.store(true, Ordering::SeqCst);
    }

    /// Ends [`Proxy::freeze`]: what arrives from now on is forwarded again.
    pub fn thaw(&self) {
        self.frozen.store(false, Ordering::SeqCst);
    }

    /// Turns the broker's next `count` Fetch answers into answers that carry `code` on every
    /// partition, with no records (`usize::MAX`: all of them, until [`Proxy::stop_failing`]).
    pub fn fail_fetches(&self, count: usize, code: i16) {
        *self.fail.lock().expect("fail") = Fail {
            remaining: count,
            code,
        };
    }

    /// Forwards the broker's Fetch answers as they are again.
    pub fn stop_failing(&self) {
        *self.fail.lock().expect("fail") = Fail::default();
    }

    /// How many Fetch answers were turned into errors so far.
    pub fn failed(&self) -> usize {
        self.failed.load(Ordering::SeqCst)
    }

    /// How many answers were held so far.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::SeqCst)
    }

    /// How many requests with `api_key` went through.
    pub fn forwarded(&self, api_key: i16) -> usize {
        self.forwarded
            .lock()
            .expect("forwarded")
            .iter()
            .filter(|k| **k == api_key)
            .count()
    }
}

fn read_frame(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).ok()?;
    let n = usize::try_from(i32::from_be_bytes(len)).ok()?;
    let mut frame = vec![0u8; 4 + n];
    frame[..4].copy_from_slice(&len);
    s.read_exact(&mut frame[4..]).ok()?;
    Some(frame)
}

fn requests(
    mut client: TcpStream,
    mut server: TcpStream,
    pending: Arc<Mutex<VecDeque<(i16, i16)>>>,
    forwarded: Arc<Mutex<Vec<i16>>>,
    frozen: Arc<AtomicBool>,
    requests_held: Arc<Mutex<HeldRequests>>,
    skew_ms: Arc<AtomicI64>,
) {
    while let Some(mut frame) = read_frame(&mut client) {
        if frozen.load(Ordering::SeqCst) {
            continue;
        }
        let api_key = i16::from_be_bytes([frame[4], frame[5]]);
        let version = i16::from_be_bytes([frame[6], frame[7]]);
        let skew = skew_ms.load(Ordering::SeqCst);
        if api_key == PRODUCE && skew != 0 {
            frame = skewed_produce(&frame, version, skew);
        }
        {
            let mut h = requests_held.lock().expect("held requests");
            if h.api_key == Some(api_key) {
                h.frames.push(frame);
                h.count += 1;
                continue;
            }
        }
        pending
            .lock()
            .expect("pending")
            .push_back((api_key, version));
        forwarded.lock().expect("forwarded").push(api_key);
        if server.write_all(&frame).is_err() {
            break;
        }
    }
    let _ = server.shutdown(Shutdown::Both);
}

#[allow(clippy::too_many_arguments)]
fn responses(
    mut server: TcpStream,
    mut client: TcpStream,
    pending: Arc<Mutex<VecDeque<(i16, i16)>>>,
    hold: Arc<Mutex<Hold>>,
    held: Arc<AtomicUsize>,
    fail: Arc<Mutex<Fail>>,
    failed: Arc<AtomicUsize>,
    frozen: Arc<AtomicBool>,
    release: Release,
) {
    // Answers come back in request order on one connection.
    while let Some(mut frame) = read_frame(&mut server) {
        let request = pending.lock().expect("pending").pop_front();
        if frozen.load(Ordering::SeqCst) {
            continue;
        }
        let api_key = request.map(|(key, _)| key);
        if let Some((key, version)) = request {
            release.before_answer_to(key, version, &frame);
        }
        if let Some((FETCH, version)) = request {
            let code = {
                let mut f = fail.lock().expect("fail");
                (f.remaining > 0).then(|| {
                    f.remaining -= 1;
                    f.code
                })
            };
            if let Some(code) = code {
                frame = fetch_error(&frame, version, code);
                failed.fetch_add(1, Ordering::SeqCst);
            }
        }
        let delay = {
            let mut h = hold.lock().expect("hold");
            if api_key == Some(h.api_key) && h.remaining > 0 {
                h.remaining -= 1;
                Some(h.delay)
            } else {
                None
            }
        };
        release.gate.pass(api_key);
        if let Some(delay) = delay {
            held.fetch_add(1, Ordering::SeqCst);
            thread::sleep(delay);
            break;
        }
        if client.write_all(&frame).is_err() {
            break;
        }
    }
    let _ = client.shutdown(Shutdown::Both);
    let _ = server.shutdown(Shutdown::Both);
}

/// What a connection's answer thread needs to send the held requests.
struct Release {
    held: Arc<Mutex<HeldRequests>>,
    target: String,
    /// Answers kept until the test opens it.
    gate: Arc<Gate>,
}

impl Release {
    /// Sends the held requests if they are due before `answer`, the broker's answer to a
    /// request with `api_key` at `version`. An AddPartitionsToTxn answer counts only when every
    /// partition was added.
    fn before_answer_to(&self, api_key: i16, version: i16, answer: &[u8]) {
        let frames = {
            let mut h = self.held.lock().expect("held requests");
            if h.release_at != Some(api_key)
                || (api_key == ADD_PARTITIONS_TO_TXN && !all_added(answer, version))
            {
                return;
            }
            h.release_at = None;
            std::mem::take(&mut h.frames)
        };
        send_held(&self.held, &self.target, frames);
    }
}

/// Sends each of `frames` to `target` on a connection of its own and waits for its answer.
fn send_held(held: &Mutex<HeldRequests>, target: &str, frames: Vec<Vec<u8>>) {
    for frame in frames {
        let api_key = i16::from_be_bytes([frame[4], frame[5]]);
        let version = i16::from_be_bytes([frame[6], frame[7]]);
        let answer = TcpStream::connect(target).ok().and_then(|mut s| {
            s.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
            s.write_all(&frame).ok()?;
            read_frame(&mut s)
        });
        let answer = answer.and_then(|a| (api_key == PRODUCE).then(|| produce_answer(&a, version)));
        held.lock().expect("held requests").answers.push(answer);
    }
}

/// Whether the AddPartitionsToTxn answer `frame` (of request `version`, 3 or older) added
/// every partition.
fn all_added(frame: &[u8], version: i16) -> bool {
    let header_version = if version >= 3 { 1 } else { 0 };
    let mut body = Bytes::copy_from_slice(&frame[4..]);
    ResponseHeader::decode(&mut body, header_version).expect("a response header");
    let resp = AddPartitionsToTxnResponse::decode(&mut body, version)
        .expect("an AddPartitionsToTxn answer");
    resp.results_by_topic_v3_and_below
        .iter()
        .flat_map(|t| t.results_by_partition.iter())
        .all(|p| p.partition_error_code == 0)
}

/// (error code, base offset) of the first partition of the Produce answer `frame` (of request
/// `version`).
fn produce_answer(frame: &[u8], version: i16) -> (i16, i64) {
    let header_version = if version >= 9 { 1 } else { 0 };
    let mut body = Bytes::copy_from_slice(&frame[4..]);
    ResponseHeader::decode(&mut body, header_version).expect("a response header");
    let resp = ProduceResponse::decode(&mut body, version).expect("a Produce answer");
    let p = resp
        .responses
        .iter()
        .flat_map(|t| t.partition_responses.iter())
        .next()
        .expect("a partition in the Produce answer");
    (p.error_code, p.base_offset)
}

/// The Produce request `frame` (of `version`) with every batch's timestamps moved by
/// `skew_ms` (the batch header's base and max timestamps; each record's is a delta from the
/// base) and its CRC computed again.
fn skewed_produce(frame: &[u8], version: i16, skew_ms: i64) -> Vec<u8> {
    let header_version = ProduceRequest::header_version(version);
    let mut body = Bytes::copy_from_slice(&frame[4..]);
    let header = RequestHeader::decode(&mut body, header_version).expect("a request header");
    let mut req = ProduceRequest::decode(&mut body, version).expect("a Produce request");
    for topic in &mut req.topic_data {
        for p in &mut topic.partition_data {
            let Some(records) = &p.records else { continue };
            let mut batches = records.to_vec();
            let mut at = 0;
            // Each batch: base offset (8 bytes), then its length (4) counted from byte 12.
            while at + 61 <= batches.len() {
                let len = i32::from_be_bytes(batches[at + 8..at + 12].try_into().expect("4"));
                let end = at + 12 + usize::try_from(len).expect("a batch length");
                for field in [at + 27, at + 35] {
                    let t = i64::from_be_bytes(batches[field..field + 8].try_into().expect("8"));
                    batches[field..field + 8].copy_from_slice(&(t + skew_ms).to_be_bytes());
                }
                let crc = crc32c::crc32c(&batches[at + 21..end]);
                batches[at + 17..at + 21].copy_from_slice(&crc.to_be_bytes());
                at = end;
            }
            p.records = Some(Bytes::from(batches));
        }
    }
    let mut out = BytesMut::new();
    out.extend_from_slice(&[0; 4]);
    header
        .encode(&mut out, header_version)
        .expect("encode the header");
    req.encode(&mut out, version).expect("encode the request");
    let len = i32::try_from(out.len() - 4).expect("small").to_be_bytes();
    out[..4].copy_from_slice(&len);
    out.to_vec()
}

/// The Fetch answer `frame` (of request `version`) with `code` on every partition and no
/// records, as a broker that cannot serve the partitions answers.
fn fetch_error(frame: &[u8], version: i16, code: i16) -> Vec<u8> {
    let header_version = if version >= 12 { 1 } else { 0 };
    let mut body = Bytes::copy_from_slice(&frame[4..]);
    let header = ResponseHeader::decode(&mut body, header_version).expect("a response header");
    let mut resp = FetchResponse::decode(&mut body, version).expect("a Fetch answer");
    for topic in &mut resp.responses {
        for p in &mut topic.partitions {
            p.error_code = code;
            p.high_watermark = -1;
            p.last_stable_offset = -1;
            p.log_start_offset = -1;
            p.aborted_transactions = None;
            p.records = None;
        }
    }
    let mut out = BytesMut::new();
    out.extend_from_slice(&[0; 4]);
    header
        .encode(&mut out, header_version)
        .expect("encode the header");
    resp.encode(&mut out, version).expect("encode the answer");
    let len = i32::try_from(out.len() - 4).expect("small").to_be_bytes();
    out[..4].copy_from_slice(&len);
    out.to_vec()
}
