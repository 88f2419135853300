//! A small raw-protocol client for what librdkafka does not offer: FindCoordinator (key type
//! transaction) and DescribeTransactions (API key 65, v0) against the role's transaction
//! coordinator. PLAINTEXT only.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kafka_coordination_core::describe::{LeadershipStatus, TransactionState};
use kafka_coordination_core::record::Role;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, DescribeTransactionsRequest, FindCoordinatorRequest, RequestHeader,
    ResponseHeader, TransactionalId,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};

use super::config::KafkaConfig;
use super::context::lock;
use crate::error::TransportError;

/// Kafka error codes this client acts on.
mod code {
    pub const NONE: i16 = 0;
    pub const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
    pub const COORDINATOR_NOT_AVAILABLE: i16 = 15;
    pub const NOT_COORDINATOR: i16 = 16;
    pub const UNSUPPORTED_VERSION: i16 = 35;
    pub const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;
    pub const TRANSACTIONAL_ID_NOT_FOUND: i16 = 105;
}

/// FindCoordinator's key type for a transactional id.
const KEY_TYPE_TRANSACTION: i8 = 1;

/// The largest response accepted (a DescribeTransactions answer for one id is tiny).
const MAX_RESPONSE: usize = 64 * 1024 * 1024;

/// What went wrong in one attempt, and whether another attempt may help.
enum Attempt {
    /// Try again after a pause; `relookup` asks FindCoordinator again first.
    Again { relookup: bool, why: String },
    /// Give up with this error.
    Stop(TransportError),
}

struct Connection {
    stream: TcpStream,
    /// API key -> the highest version both sides support.
    versions: HashMap<i16, i16>,
}

/// The client. Connections are kept per broker address and reused.
pub(crate) struct DescribeClient {
    bootstrap: Vec<String>,
    client_id: StrBytes,
    timeout: Duration,
    unsupported_security: Option<String>,
    connections: Mutex<HashMap<String, Connection>>,
    correlation: AtomicI32,
}

impl DescribeClient {
    pub fn new(config: &KafkaConfig) -> Self {
        let security = config.security_protocol();
        DescribeClient {
            bootstrap: config
                .bootstrap_servers()
                .split(',')
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
                .collect(),
            client_id: StrBytes::from_string(format!("{}-describe", "kafka-coordination")),
            timeout: config.request_timeout(),
            unsupported_security: (security != "plaintext").then_some(security),
            connections: Mutex::new(HashMap::new()),
            correlation: AtomicI32::new(1),
        }
    }

    /// The role's current pair and transaction state, or `NOT_FOUND`.
    pub fn describe(&self, role: &Role) -> Result<LeadershipStatus, TransportError> {
        if let Some(protocol) = &self.unsupported_security {
            return Err(TransportError::config(format!(
                "describe_epoch uses a raw DescribeTransactions client that supports PLAINTEXT \
                 only; security.protocol={protocol} is not supported by it yet"
            )));
        }
        let deadline = Instant::now() + self.timeout;
        let mut attempt: u32 = 0;
        let mut coordinator: Option<String> = None;
        loop {
            let result = match coordinator.clone() {
                Some(addr) => self.describe_at(&addr, role, deadline),
                None => match self.find_coordinator(role, deadline) {
                    Ok(addr) => {
                        coordinator = Some(addr.clone());
                        self.describe_at(&addr, role, deadline)
                    }
                    Err(e) => Err(e),
                },
            };
            let why = match result {
                Ok(status) => return Ok(status),
                Err(Attempt::Stop(e)) => return Err(e),
                Err(Attempt::Again { relookup, why }) => {
                    if relookup {
                        coordinator = None;
                    }
                    why
                }
            };
            attempt += 1;
            let pause = Duration::from_millis(50u64 << attempt.min(4));
            let now = Instant::now();
            if now + pause >= deadline {
                return Err(TransportError::retriable(format!(
                    "describing role '{role}': no usable answer within {:?} from the Kafka \
                     cluster at {}: {why}",
                    self.timeout,
                    self.bootstrap.join(",")
                )));
            }
            thread::sleep(pause);
        }
    }

    /// The address (`host:port`) of the role's transaction coordinator.
    fn find_coordinator(&self, role: &Role, deadline: Instant) -> Result<String, Attempt> {
        let mut last = String::from("no bootstrap server configured");
        for server in &self.bootstrap {
            let outcome = self.with_connection(server, deadline, |conn, this| {
                let version = conn.version::<FindCoordinatorRequest>();
                let Some(version) = version.filter(|v| *v >= 1) else {
                    return Err(Attempt::Stop(TransportError::config(format!(
                        "broker {server} does not support FindCoordinator for transactional ids"
                    ))));
                };
                let mut req = FindCoordinatorRequest::default().with_key_type(KEY_TYPE_TRANSACTION);
                if version >= 4 {
                    req = req.with_coordinator_keys(vec![StrBytes::from_string(
                        role.as_str().to_owned(),
                    )]);
                } else {
                    req = req.with_key(StrBytes::from_string(role.as_str().to_owned()));
                }
                let resp = this.call(conn, &req, version, deadline)?;
                let (error, message, host, port) = if version >= 4 {
                    match resp.coordinators.into_iter().next() {
                        Some(c) => (c.error_code, c.error_message, c.host, c.port),
                        None => {
                            return Err(Attempt::Again {
                                relookup: true,
                                why: "FindCoordinator answered with no coordinator".to_owned(),
                            })
                        }
                    }
                } else {
                    (resp.error_code, resp.error_message, resp.host, resp.port)
                };
                match error {
                    code::NONE => Ok(format!("{host}:{port}")),
                    code::COORDINATOR_LOAD_IN_PROGRESS
                    | code::COORDINATOR_NOT_AVAILABLE
                    | code::NOT_COORDINATOR => Err(Attempt::Again {
                        relookup: true,
                        why: format!(
                            "FindCoordinator: error {error} ({})",
                            message.as_deref().unwrap_or(code_name(error))
                        ),
                    }),
                    code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED => {
                        Err(Attempt::Stop(unauthorized(role)))
                    }
                    other => Err(Attempt::Stop(TransportError::retriable(format!(
                        "FindCoordinator for role '{role}' failed with error {other} ({})",
                        message.as_deref().unwrap_or(code_name(other))
                    )))),
                }
            });
            match outcome {
                Ok(addr) => return Ok(addr),
                Err(Attempt::Again { why, .. }) => last = format!("{server}: {why}"),
                Err(stop) => return Err(stop),
            }
        }
        Err(Attempt::Again {
            relookup: true,
            why: last,
        })
    }

    fn describe_at(
        &self,
        addr: &str,
        role: &Role,
        deadline: Instant,
    ) -> Result<LeadershipStatus, Attempt> {
        self.with_connection(addr, deadline, |conn, this| {
            if conn.version::<DescribeTransactionsRequest>().is_none() {
                return Err(Attempt::Stop(TransportError::config(format!(
                    "broker {addr} does not support DescribeTransactions (API key 65; Kafka 3.0 or newer)"
                ))));
            }
            let req = DescribeTransactionsRequest::default().with_transactional_ids(vec![TransactionalId(
                StrBytes::from_string(role.as_str().to_owned()),
            )]);
            let resp = this.call(conn, &req, 0, deadline)?;
            let Some(state) = resp
                .transaction_states
                .into_iter()
                .find(|s| s.transactional_id.0.as_str() == role.as_str())
            else {
                return Err(Attempt::Stop(TransportError::fatal(format!(
                    "DescribeTransactions from {addr} did not mention role '{role}'"
                ))));
            };
            match state.error_code {
                code::NONE => Ok(LeadershipStatus::described(
                    state.producer_id.0,
                    state.producer_epoch,
                    TransactionState::parse(state.transaction_state.as_str()),
                )),
                code::TRANSACTIONAL_ID_NOT_FOUND => Ok(LeadershipStatus::NOT_FOUND),
                code::COORDINATOR_LOAD_IN_PROGRESS => Err(Attempt::Again {
                    relookup: false,
                    why: format!("DescribeTransactions at {addr}: the coordinator is loading"),
                }),
                code::COORDINATOR_NOT_AVAILABLE | code::NOT_COORDINATOR => Err(Attempt::Again {
                    relookup: true,
                    why: format!("DescribeTransactions at {addr}: error {} ({})", state.error_code, code_name(state.error_code)),
                }),
                code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED => Err(Attempt::Stop(unauthorized(role))),
                other => Err(Attempt::Stop(TransportError::retriable(format!(
                    "DescribeTransactions for role '{role}' at {addr} failed with error {other} ({})",
                    code_name(other)
                )))),
            }
        })
    }

    /// Runs `f` with a connection to `addr` (opened and version-negotiated when needed). A
    /// connection that failed is dropped, and the failure is an `Again`.
    fn with_connection<T>(
        &self,
        addr: &str,
        deadline: Instant,
        f: impl FnOnce(&mut Connection, &Self) -> Result<T, Attempt>,
    ) -> Result<T, Attempt> {
        let mut conns = lock(&self.connections);
        if !conns.contains_key(addr) {
            let conn = self.connect(addr, deadline)?;
            conns.insert(addr.to_owned(), conn);
        }
        let Some(conn) = conns.get_mut(addr) else {
            return Err(Attempt::Again {
                relookup: true,
                why: format!("no connection to {addr}"),
            });
        };
        let result = f(conn, self);
        if matches!(&result, Err(Attempt::Again { .. })) {
            // The stream may be out of step (a timeout mid-response): start afresh next time.
            conns.remove(addr);
        }
        result
    }

    fn connect(&self, addr: &str, deadline: Instant) -> Result<Connection, Attempt> {
        let again = |why: String| Attempt::Again {
            relookup: true,
            why,
        };
        let addrs: Vec<_> = addr
            .to_socket_addrs()
            .map_err(|e| again(format!("cannot resolve {addr}: {e}")))?
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
                    let mut conn = Connection {
                        stream,
                        versions: HashMap::new(),
                    };
                    self.negotiate(&mut conn, deadline)?;
                    return Ok(conn);
                }
                Err(e) => last = format!("cannot connect to {addr} ({sa}): {e}"),
            }
        }
        Err(again(last))
    }

    fn negotiate(&self, conn: &mut Connection, deadline: Instant) -> Result<(), Attempt> {
        let req = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("kafka-coordination"))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        let resp = self.call(conn, &req, 3, deadline)?;
        if resp.error_code == code::UNSUPPORTED_VERSION {
            return Err(Attempt::Stop(TransportError::config(
                "the broker does not support ApiVersions v3 (Kafka 2.4 or newer is needed)",
            )));
        }
        if resp.error_code != code::NONE {
            return Err(Attempt::Again {
                relookup: true,
                why: format!("ApiVersions failed with error {}", resp.error_code),
            });
        }
        for k in resp.api_keys {
            let ours = ApiKey::try_from(k.api_key)
                .ok()
                .map(|key| key.valid_versions());
            if let Some(ours) = ours {
                let max = k.max_version.min(ours.max);
                if max >= k.min_version.max(ours.min) {
                    conn.versions.insert(k.api_key, max);
                }
            }
        }
        Ok(())
    }

    /// Sends `req` at `version` and reads its response.
    fn call<R: Request>(
        &self,
        conn: &mut Connection,
        req: &R,
        version: i16,
        deadline: Instant,
    ) -> Result<R::Response, Attempt> {
        let again = |why: String| Attempt::Again {
            relookup: true,
            why,
        };
        let correlation_id = self.correlation.fetch_add(1, Ordering::Relaxed);
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
                Attempt::Stop(TransportError::fatal(format!(
                    "encoding request {}: {e}",
                    R::KEY
                )))
            })?;
        let size = i32::try_from(buf.len() - 4)
            .map_err(|_| Attempt::Stop(TransportError::fatal("request too large")))?;
        buf[..4].copy_from_slice(&size.to_be_bytes());

        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Err(again("timed out".to_owned()));
        }
        let io =
            |e: std::io::Error| again(format!("talking to the broker (API key {}): {e}", R::KEY));
        conn.stream.set_write_timeout(Some(remaining)).map_err(io)?;
        conn.stream.set_read_timeout(Some(remaining)).map_err(io)?;
        conn.stream.write_all(&buf).map_err(io)?;

        let mut len = [0u8; 4];
        conn.stream.read_exact(&mut len).map_err(io)?;
        let len = usize::try_from(i32::from_be_bytes(len)).unwrap_or(usize::MAX);
        if len > MAX_RESPONSE {
            return Err(again(format!(
                "the broker announced a response of {len} bytes"
            )));
        }
        let mut body = vec![0u8; len];
        conn.stream.read_exact(&mut body).map_err(io)?;
        let mut body = Bytes::from(body);
        let malformed = |e: String| {
            again(format!(
                "malformed response to API key {} v{version}: {e}",
                R::KEY
            ))
        };
        let resp_header = ResponseHeader::decode(
            &mut body,
            <R::Response as HeaderVersion>::header_version(version),
        )
        .map_err(|e| malformed(e.to_string()))?;
        if resp_header.correlation_id != correlation_id {
            return Err(again(format!(
                "response correlation id {} does not match request {correlation_id}",
                resp_header.correlation_id
            )));
        }
        R::Response::decode(&mut body, version).map_err(|e| malformed(e.to_string()))
    }
}

impl Connection {
    /// The version to use for request type `R`, if the broker supports it.
    fn version<R: Request>(&self) -> Option<i16> {
        self.versions.get(&R::KEY).copied()
    }
}

fn unauthorized(role: &Role) -> TransportError {
    TransportError::unauthorized(format!(
        "not authorized to describe role '{role}': the principal needs the DESCRIBE ACL on \
         TransactionalId '{role}' (TRANSACTIONAL_ID_AUTHORIZATION_FAILED)"
    ))
}

fn code_name(code: i16) -> &'static str {
    match code {
        code::COORDINATOR_LOAD_IN_PROGRESS => "COORDINATOR_LOAD_IN_PROGRESS",
        code::COORDINATOR_NOT_AVAILABLE => "COORDINATOR_NOT_AVAILABLE",
        code::NOT_COORDINATOR => "NOT_COORDINATOR",
        code::UNSUPPORTED_VERSION => "UNSUPPORTED_VERSION",
        code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED => "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
        code::TRANSACTIONAL_ID_NOT_FOUND => "TRANSACTIONAL_ID_NOT_FOUND",
        _ => "see Kafka's protocol error codes",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn security_other_than_plaintext_is_a_config_error() {
        let config =
            KafkaConfig::new("127.0.0.1:1", 1).with_property("security.protocol", "SASL_SSL");
        let client = DescribeClient::new(&config);
        let role = Role::new("r").expect("role");
        let e = client.describe(&role).expect_err("refused");
        assert_eq!(e.kind(), crate::error::ErrorKind::Config);
        assert!(e.message().contains("sasl_ssl"), "{}", e.message());
    }

    #[test]
    fn an_unreachable_cluster_is_retriable_and_named() {
        // Port 1 on loopback refuses connections.
        let config =
            KafkaConfig::new("127.0.0.1:1", 1).with_request_timeout(Duration::from_millis(300));
        let client = DescribeClient::new(&config);
        let role = Role::new("r").expect("role");
        let e = client.describe(&role).expect_err("unreachable");
        assert!(e.is_retriable());
        assert!(e.message().contains("127.0.0.1:1"), "{}", e.message());
    }
}
