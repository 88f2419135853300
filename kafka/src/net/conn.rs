//! One connection to one broker: framing, correlation ids and version negotiation
//! (ApiVersions) over a plain or TLS stream, and the SASL session it holds (KIP-368).

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiVersionsRequest, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};

use super::refusal::{refusal, rustls_error};
use crate::api::api_versions::{self, ApiVersions};
use crate::api::{Attempt, Exchange};
use crate::response_shapes;
use kafka_coordination_transport::error::TransportError;

/// The largest response accepted. The answers this client asks for are small (a metadata
/// answer for a large cluster is the biggest); a bogus length must not allocate gigabytes.
pub(crate) const MAX_RESPONSE: usize = 16 * 1024 * 1024;

/// Why a call failed.
#[derive(Debug)]
pub(crate) enum NetError {
    /// The connection failed or timed out, or the broker is unreachable: the connection is
    /// dropped; another attempt (perhaps elsewhere) may succeed.
    Io(String),
    /// Anything else: the error says what (configuration, authentication, a malformed answer).
    Stop(TransportError),
}

/// An attempt's verdict inside the connection layer: a try that another attempt may mend
/// drops the connection; a stop stays a stop.
impl From<Attempt> for NetError {
    fn from(a: Attempt) -> Self {
        match a {
            Attempt::Stop(e) => NetError::Stop(e),
            Attempt::Broken(why) | Attempt::Silent(why) | Attempt::Again { why, .. } => {
                NetError::Io(why)
            }
        }
    }
}

impl From<NetError> for Attempt {
    fn from(e: NetError) -> Self {
        match e {
            NetError::Io(why) => Attempt::Broken(why),
            NetError::Stop(e) => Attempt::Stop(e),
        }
    }
}

/// A byte stream to a broker: plain TCP or TLS over TCP.
pub(crate) trait Stream: Read + Write + Send {
    /// Sets the read and write timeouts of the socket underneath.
    fn set_timeouts(&mut self, timeout: Duration) -> io::Result<()>;
}

impl Stream for TcpStream {
    fn set_timeouts(&mut self, timeout: Duration) -> io::Result<()> {
        self.set_read_timeout(Some(timeout))?;
        self.set_write_timeout(Some(timeout))
    }
}

/// One connection to one broker, authenticated and version-negotiated.
pub(crate) struct Conn {
    addr: String,
    stream: Box<dyn Stream>,
    /// API key -> the highest version both sides support.
    versions: HashMap<i16, i16>,
    /// The cluster's finalized `transaction.version` level, from ApiVersions.
    transaction_version: Option<i16>,
    correlation: i32,
    client_id: StrBytes,
    /// Where this connection counts its requests (its pool's table).
    counts: Arc<ApiCounts>,
    /// The longest any one request waits for its answer, whatever the caller's deadline.
    pub(crate) request_cap: Option<Duration>,
    /// The socket, for the pool to shut down when it gives up on the request in flight.
    pub(crate) socket: Option<Arc<TcpStream>>,
    /// The SASL session, when the broker limits its lifetime (KIP-368).
    session: Option<Session>,
}

/// A SASL session the broker ends after `lifetime` (its `connections.max.reauth.ms`, or an
/// OAuth token's remaining lifetime if shorter): the broker closes the connection at the
/// first request it receives after that, unless the client authenticated again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Session {
    /// When the client started to authenticate (before the broker's clock started it).
    started: Instant,
    lifetime: Duration,
}

/// What a connection's SASL session needs before the next request (see [`Conn::session_due`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SessionDue {
    /// Nothing: no session limit, or well within it.
    No,
    /// Authenticate again on this connection first: 85% of the session has passed.
    Reauthenticate,
    /// Too close to the end (95%) to re-authenticate in time: open a new connection.
    Reopen,
}

/// The share of a session after which a connection re-authenticates before its next request
/// (the Java client picks 85% to 95%), and the share after which it is replaced instead.
const REAUTH_AT: u32 = 85;
const REOPEN_AT: u32 = 95;

impl Session {
    /// What is due at `now`.
    pub(crate) fn due(&self, now: Instant) -> SessionDue {
        let at = |percent: u32| self.started + self.lifetime * percent / 100;
        if now >= at(REOPEN_AT) {
            SessionDue::Reopen
        } else if now >= at(REAUTH_AT) {
            SessionDue::Reauthenticate
        } else {
            SessionDue::No
        }
    }
}

impl Conn {
    /// Connects to `addr` (`host:port`), secures the stream with `wrap` (TLS, or nothing) and
    /// negotiates versions; the caller authenticates the connection (see `Security::open`).
    /// Once connected, and before the handshake, `on_socket` is given the socket (to shut it
    /// down from another thread if the broker turns out silent); an `Err` from it (why) ends
    /// the attempt there.
    pub(crate) fn open(
        addr: &str,
        wrap: impl FnOnce(TcpStream) -> Result<Box<dyn Stream>, NetError>,
        client_id: &StrBytes,
        counts: Arc<ApiCounts>,
        deadline: Instant,
        on_socket: impl FnOnce(&Arc<TcpStream>) -> Result<(), String>,
    ) -> Result<Conn, NetError> {
        let tcp = connect_tcp(addr, deadline)?;
        let socket = tcp.try_clone().ok().map(Arc::new);
        if let Some(socket) = &socket {
            on_socket(socket).map_err(|why| {
                NetError::Io(format!(
                    "not connecting to {addr}, which went silent ({why})"
                ))
            })?;
        }
        let stream = wrap(tcp)?;
        let mut conn = Conn {
            addr: addr.to_owned(),
            stream,
            versions: HashMap::new(),
            transaction_version: None,
            correlation: 0,
            client_id: client_id.clone(),
            counts,
            request_cap: None,
            socket,
            session: None,
        };
        let broker_keys = conn.negotiate(deadline)?;
        super::floor::check(addr, &broker_keys, |key| conn.versions.get(&key).copied()).map_err(
            |why| {
                NetError::Stop(
                    TransportError::config(why)
                        .in_section(kafka_coordination_transport::error::section::OLD_BROKER),
                )
            },
        )?;
        Ok(conn)
    }

    /// Notes the SASL session that started at `started` (before the handshake was sent) and
    /// that the broker said lasts `lifetime_ms` (SaslAuthenticate v1+; 0: no limit).
    pub(crate) fn set_session(&mut self, started: Instant, lifetime_ms: i64) {
        self.session = u64::try_from(lifetime_ms)
            .ok()
            .filter(|ms| *ms > 0)
            .map(|ms| Session {
                started,
                lifetime: Duration::from_millis(ms),
            });
    }

    /// What the SASL session needs at `now` before another request is sent (see
    /// [`SessionDue`]).
    pub(crate) fn session_due(&self, now: Instant) -> SessionDue {
        self.session.map_or(SessionDue::No, |s| s.due(now))
    }

    /// The broker's address.
    pub(crate) fn addr(&self) -> &str {
        &self.addr
    }

    /// The version to use for request type `R`, if the broker supports one this crate knows.
    pub(crate) fn version<R: Request>(&self) -> Option<i16> {
        self.versions.get(&R::KEY).copied()
    }

    /// The highest version of `R` at most `max`, if the broker supports one.
    pub(crate) fn version_at_most<R: Request>(&self, max: i16) -> Option<i16> {
        let broker = self.version::<R>()?;
        let min = R::VERSIONS.min;
        let v = broker.min(max);
        (v >= min).then_some(v)
    }

    /// The cluster's finalized `transaction.version` feature level as this broker announced
    /// it when the connection opened (ApiVersions v3's `finalized_features`; a feature at level
    /// 0 is not listed, so its absence is 0), or `None` when the broker announced no finalized
    /// features at all (epoch -1: no feature versioning, or not known yet). At 2 or more,
    /// clients that send EndTxn v5+ get a new epoch at every commit (KIP-890); this client
    /// sends older versions (see `txn.rs`).
    pub(crate) fn transaction_version(&self) -> Option<i16> {
        self.transaction_version
    }

    /// Asks the broker which APIs and versions it answers ([`ApiVersions`]) and keeps, for
    /// each API both sides know, the highest version both speak. Returns every API key the
    /// broker listed.
    fn negotiate(&mut self, deadline: Instant) -> Result<Vec<i16>, NetError> {
        let req = ApiVersions.request(api_versions::VERSION);
        let body = self.send::<ApiVersionsRequest>(&req, api_versions::VERSION, deadline)?;
        if let Some(refused) = ApiVersions::refused(&body, &self.addr) {
            return Err(refused.into());
        }
        let answer = self.decode::<ApiVersionsRequest>(body, api_versions::VERSION)?;
        let negotiated = ApiVersions.answer(answer, api_versions::VERSION, &self.addr)?;
        self.transaction_version = negotiated.transaction_version;
        self.versions.extend(negotiated.versions);
        Ok(negotiated.broker_keys)
    }

    /// Sends `req` at `version` and reads its response, by `deadline` (and, on a pool's
    /// connection, within the request timeout, whatever the deadline).
    pub(crate) fn call<R: Request>(
        &mut self,
        req: &R,
        version: i16,
        deadline: Instant,
    ) -> Result<R::Response, NetError> {
        let body = self.send::<R>(req, version, deadline)?;
        self.decode::<R>(body, version)
    }

    /// One exchange of an API ([`crate::api`]): the highest version both sides speak, the
    /// request sent at it, the answer read and interpreted, by `deadline`.
    pub(crate) fn exchange<X: Exchange>(
        &mut self,
        x: &X,
        deadline: Instant,
    ) -> Result<X::Output, Attempt> {
        let Some(version) = self.version_at_most::<X::Request>(X::MAX_VERSION) else {
            return Err(x.unsupported(&self.addr));
        };
        if version < X::MIN_VERSION {
            return Err(x.too_old(version, &self.addr));
        }
        let answer = self.call(&x.request(version), version, deadline)?;
        x.answer(answer, version, &self.addr)
    }

    /// Decodes the body of `R`'s response at `version` once its bytes have passed the shape
    /// check ([`response_shapes::check`]), which bounds what decoding allocates. An answer that fails the
    /// check drops the connection (the call may be tried again on a new one).
    pub(crate) fn decode<R: Request>(
        &self,
        mut body: Bytes,
        version: i16,
    ) -> Result<R::Response, NetError> {
        if let Err(why) = response_shapes::check(R::KEY, version, &body) {
            return Err(NetError::Io(format!(
                "a malformed answer from {} to API key {} v{version} ({} bytes): {why}",
                self.addr,
                R::KEY,
                body.len()
            )));
        }
        R::Response::decode(&mut body, version).map_err(|e| {
            NetError::Stop(TransportError::fatal(format!(
                "malformed response from {} to API key {} v{version}: {e}",
                self.addr,
                R::KEY
            )))
        })
    }

    /// Sends a raw request and returns the response body after its header.
    fn send<R: Request>(
        &mut self,
        req: &R,
        version: i16,
        deadline: Instant,
    ) -> Result<Bytes, NetError> {
        let deadline = self
            .request_cap
            .map_or(deadline, |cap| deadline.min(Instant::now() + cap));
        self.correlation = self.correlation.wrapping_add(1);
        let correlation_id = self.correlation;
        self.counts.count(R::KEY);
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(self.client_id.clone()));
        let mut buf = BytesMut::new();
        buf.extend_from_slice(&[0; 4]);
        header
            .encode(&mut buf, R::header_version(version))
            .and_then(|()| req.encode(&mut buf, version))
            .map_err(|e| {
                NetError::Stop(TransportError::fatal(format!(
                    "encoding request {} v{version}: {e}",
                    R::KEY
                )))
            })?;
        let size = i32::try_from(buf.len() - 4)
            .map_err(|_| NetError::Stop(TransportError::fatal("request too large")))?;
        buf[..4].copy_from_slice(&size.to_be_bytes());
        self.write_frame(&buf, deadline)?;
        let mut body = self.read_frame(deadline)?;
        let resp_header = ResponseHeader::decode(
            &mut body,
            <R::Response as HeaderVersion>::header_version(version),
        )
        .map_err(|e| {
            NetError::Io(format!(
                "a malformed response header from {}: {e}",
                self.addr
            ))
        })?;
        if resp_header.correlation_id != correlation_id {
            return Err(NetError::Io(format!(
                "response correlation id {} from {} does not match request {correlation_id}",
                resp_header.correlation_id, self.addr
            )));
        }
        Ok(body)
    }

    fn io_error(&self, what: &str, e: &io::Error) -> NetError {
        // A TLS refusal that retrying cannot fix (the broker rejected the client certificate)
        // is a configuration error; everything else is an I/O failure.
        io_error(&self.addr, what, e)
    }

    /// Sets the socket's timeouts to what is left until `deadline`, and returns that.
    fn arm(&mut self, deadline: Instant) -> Result<Duration, NetError> {
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Err(NetError::Io(format!("timed out talking to {}", self.addr)));
        }
        self.stream
            .set_timeouts(remaining)
            .map_err(|e| self.io_error("setting timeouts for", &e))?;
        Ok(remaining)
    }

    /// [`io_error`](Self::io_error), except that a socket timeout says what it was: no answer
    /// (or no room to write) within `waited`.
    fn timed_out(&self, what: &str, waited: Duration, e: &io::Error) -> NetError {
        match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => NetError::Io(format!(
                "{what} {}: nothing within {waited:?} (the request timeout, or what was left of \
                 the call's time)",
                self.addr
            )),
            _ => self.io_error(what, e),
        }
    }

    /// Writes one size-prefixed frame (the size already in `frame`).
    pub(crate) fn write_frame(&mut self, frame: &[u8], deadline: Instant) -> Result<(), NetError> {
        let waited = self.arm(deadline)?;
        let written = self
            .stream
            .write_all(frame)
            .and_then(|()| self.stream.flush());
        written.map_err(|e| self.timed_out("writing to", waited, &e))
    }

    /// Reads one size-prefixed frame and returns its body.
    pub(crate) fn read_frame(&mut self, deadline: Instant) -> Result<Bytes, NetError> {
        let waited = self.arm(deadline)?;
        let mut len = [0u8; 4];
        if let Err(e) = self.stream.read_exact(&mut len) {
            return Err(self.timed_out("reading from", waited, &e));
        }
        let len = i32::from_be_bytes(len);
        let len = usize::try_from(len)
            .ok()
            .filter(|l| *l <= MAX_RESPONSE)
            .ok_or_else(|| {
                NetError::Io(format!(
                    "{} announced a response of {len} bytes (at most {MAX_RESPONSE} accepted)",
                    self.addr
                ))
            })?;
        // Grow with the bytes that really arrive: a bogus length costs no memory up front.
        let mut body = Vec::with_capacity(len.min(64 * 1024));
        let read = (&mut self.stream).take(len as u64).read_to_end(&mut body);
        if let Err(e) = read {
            return Err(self.timed_out("reading from", waited, &e));
        }
        if body.len() < len {
            return Err(NetError::Io(format!(
                "{} closed the connection after {} of {len} announced bytes",
                self.addr,
                body.len()
            )));
        }
        Ok(Bytes::from(body))
    }
}

/// A broker in memory: reads return the bytes it was given (then end of stream), writes are
/// dropped. For tests and the fuzz harness.
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) struct Replay(io::Cursor<Vec<u8>>);

#[cfg(any(test, feature = "fuzzing"))]
impl Replay {
    pub(crate) fn new(answers: Vec<u8>) -> Replay {
        Replay(io::Cursor::new(answers))
    }
}

#[cfg(any(test, feature = "fuzzing"))]
impl Read for Replay {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf)
    }
}

#[cfg(any(test, feature = "fuzzing"))]
impl Write for Replay {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(any(test, feature = "fuzzing"))]
impl Stream for Replay {
    fn set_timeouts(&mut self, _: Duration) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(any(test, feature = "fuzzing"))]
impl Conn {
    /// A connection over `stream` that has negotiated nothing yet.
    pub(crate) fn over(addr: &str, stream: Box<dyn Stream>) -> Conn {
        Conn {
            addr: addr.to_owned(),
            socket: None,
            stream,
            versions: HashMap::new(),
            transaction_version: None,
            correlation: 0,
            client_id: StrBytes::from_static_str("kafka-coordination-test"),
            counts: Arc::default(),
            request_cap: None,
            session: None,
        }
    }

    /// Takes `versions` (API key, version) as negotiated.
    #[cfg(test)]
    pub(crate) fn with_versions(mut self, versions: &[(i16, i16)]) -> Conn {
        self.versions.extend(versions.iter().copied());
        self
    }

    /// Negotiates versions (ApiVersions), as [`Conn::open`] does after connecting.
    #[cfg(feature = "fuzzing")]
    pub(crate) fn negotiate_versions(&mut self, deadline: Instant) -> Result<(), NetError> {
        self.negotiate(deadline).map(drop)
    }
}

/// Classifies an I/O error met on an established connection to `addr` while `what` (for
/// example "reading from"): a TLS alert saying that the broker refused this client's
/// certificate is a configuration error (with TLS 1.3 it comes after the client's side of the
/// handshake is over, so with the first answer); everything else is `Io`.
pub(crate) fn io_error(addr: &str, what: &str, e: &io::Error) -> NetError {
    match rustls_error(e).and_then(|err| refusal(addr, err)) {
        Some(message) => NetError::Stop(TransportError::config(message)),
        None => NetError::Io(format!("{what} {addr}: {e}")),
    }
}

fn connect_tcp(addr: &str, deadline: Instant) -> Result<TcpStream, NetError> {
    let addrs: Vec<_> = addr
        .to_socket_addrs()
        .map_err(|e| NetError::Io(format!("cannot resolve {addr}: {e}")))?
        .collect();
    let mut last = format!("{addr} resolved to no address");
    for sa in addrs {
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            break;
        }
        match TcpStream::connect_timeout(&sa, remaining) {
            Ok(stream) => {
                let _ = stream.set_nodelay(true);
                return Ok(stream);
            }
            Err(e) => last = format!("{CANNOT_CONNECT} {addr} ({sa}): {e}"),
        }
    }
    Err(NetError::Io(last))
}

/// How [`connect_tcp`] begins the error of a connection the broker refused or left
/// unanswered (not one whose name did not resolve).
pub(crate) const CANNOT_CONNECT: &str = "cannot connect to";

/// Requests sent, by API key (keys past the table share its last slot).
pub(crate) struct ApiCounts([std::sync::atomic::AtomicU64; 96]);

impl Default for ApiCounts {
    fn default() -> Self {
        ApiCounts([const { std::sync::atomic::AtomicU64::new(0) }; 96])
    }
}

impl ApiCounts {
    fn count(&self, key: i16) {
        let last = self.0.len() - 1;
        let i = usize::try_from(key).map_or(last, |k| k.min(last));
        self.0[i].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// `(API key, count)` for every key sent at least once.
    pub(crate) fn sent(&self) -> Vec<(i16, u64)> {
        self.0
            .iter()
            .enumerate()
            .filter_map(|(k, n)| {
                let n = n.load(std::sync::atomic::Ordering::Relaxed);
                (n > 0).then(|| (i16::try_from(k).unwrap_or(i16::MAX), n))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::{
        ApiKey, ApiVersionsResponse, DescribeTransactionsRequest, DescribeTransactionsResponse,
    };
    use kafka_protocol::protocol::Encodable;

    fn conn(answers: Vec<u8>) -> Conn {
        Conn::over("broker:9092", Box::new(Replay::new(answers)))
    }

    fn soon() -> Instant {
        Instant::now() + Duration::from_secs(5)
    }

    fn io_message(r: Result<impl std::fmt::Debug, NetError>) -> String {
        match r {
            Err(NetError::Io(why)) => why,
            other => panic!("expected an I/O error, got {other:?}"),
        }
    }

    /// The frame lengths that once cost memory up front (a 64 MiB buffer for a length the
    /// broker never sent): a length past the limit is refused before anything is read, and a
    /// length within it costs only the bytes that arrive.
    #[test]
    fn bogus_frame_lengths_are_refused_or_cost_only_what_arrives() {
        let mut c = conn(i32::MAX.to_be_bytes().to_vec());
        let why = io_message(c.read_frame(soon()));
        assert!(
            why.contains("announced a response of 2147483647 bytes"),
            "{why}"
        );
        let mut c = conn((-5i32).to_be_bytes().to_vec());
        assert!(io_message(c.read_frame(soon())).contains("-5 bytes"));
        let mut frame = (MAX_RESPONSE as i32).to_be_bytes().to_vec();
        frame.extend([7u8; 10]);
        let why = io_message(conn(frame).read_frame(soon()));
        assert!(
            why.contains(&format!("after 10 of {MAX_RESPONSE} announced bytes")),
            "{why}"
        );
        let mut frame = 3i32.to_be_bytes().to_vec();
        frame.extend([1u8, 2, 3, 4]);
        assert_eq!(
            &conn(frame).read_frame(soon()).expect("a frame")[..],
            [1, 2, 3]
        );
    }

    /// The finalized `transaction.version` comes from the ApiVersions answer: its level when
    /// listed, 0 when finalized features are announced without it, unknown when none are.
    #[test]
    fn the_finalized_transaction_version_is_read_from_api_versions() {
        use kafka_protocol::messages::api_versions_response::{ApiVersion, FinalizedFeatureKey};
        let answer = |features: Vec<FinalizedFeatureKey>, epoch: i64| {
            let resp = ApiVersionsResponse::default()
                .with_api_keys(vec![ApiVersion::default()
                    .with_api_key(ApiKey::DescribeTransactions as i16)
                    .with_min_version(0)
                    .with_max_version(0)])
                .with_finalized_features_epoch(epoch)
                .with_finalized_features(features);
            let mut b = bytes::BytesMut::new();
            resp.encode(&mut b, 3).expect("encode");
            // Header v0 (ApiVersions answers never carry tagged header fields): correlation 1.
            let mut f = ((b.len() + 4) as i32).to_be_bytes().to_vec();
            f.extend(1i32.to_be_bytes());
            f.extend(&b[..]);
            let mut c = conn(f);
            c.negotiate(soon()).expect("negotiated");
            assert_eq!(c.version::<DescribeTransactionsRequest>(), Some(0));
            c.transaction_version()
        };
        let feature = |name: &'static str, level: i16| {
            FinalizedFeatureKey::default()
                .with_name(StrBytes::from_static_str(name))
                .with_min_version_level(level)
                .with_max_version_level(level)
        };
        assert_eq!(
            answer(
                vec![
                    feature("metadata.version", 27),
                    feature("transaction.version", 2)
                ],
                12
            ),
            Some(2)
        );
        assert_eq!(answer(vec![feature("transaction.version", 1)], 12), Some(1));
        assert_eq!(answer(vec![feature("metadata.version", 27)], 12), Some(0));
        assert_eq!(answer(Vec::new(), -1), None);
    }

    /// A whole exchange over a replayed connection: a well-formed answer decodes; the same
    /// answer with its array count raised past the bytes left drops the connection (an I/O
    /// error) instead of reaching the decoder.
    #[test]
    fn answers_are_checked_before_they_are_decoded() {
        let body = {
            let mut b = bytes::BytesMut::new();
            DescribeTransactionsResponse::default()
                .encode(&mut b, 0)
                .expect("encode");
            b.to_vec()
        };
        // Header v1: correlation id 1, no tagged fields.
        let frame = |body: &[u8]| {
            let mut f = ((body.len() + 5) as i32).to_be_bytes().to_vec();
            f.extend(1i32.to_be_bytes());
            f.push(0);
            f.extend(body);
            f
        };
        let req = DescribeTransactionsRequest::default();
        let resp = conn(frame(&body)).call(&req, 0, soon()).expect("decodes");
        assert!(resp.transaction_states.is_empty());
        // The array count is the fifth byte (after the throttle time): 2^28 elements.
        let mut huge = body[..4].to_vec();
        huge.extend([0x81, 0x80, 0x80, 0x80, 0x01, 0]);
        let why = io_message(conn(frame(&huge)).call(&req, 0, soon()));
        assert!(why.contains("claims 268435456 elements"), "{why}");
        // A wrong correlation id is an I/O error too.
        let mut other = frame(&body);
        other[7] = 2;
        assert!(io_message(conn(other).call(&req, 0, soon())).contains("correlation"));
    }
}
