//! DescribeTransactions (API key 65, v0) at the role's transaction coordinator, on the native
//! connections of [`Cluster`] (so on every `security.protocol` they support).

use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_coordination_core::leadership_status::{LeadershipStatus, TransactionState};
use kafka_coordination_core::record::Role;
use kafka_coordination_core::time::UnixMillis;
use kafka_protocol::messages::describe_transactions_response::TransactionState as TransactionStateResponse;
use kafka_protocol::messages::{DescribeTransactionsRequest, TransactionalId};
use kafka_protocol::protocol::StrBytes;

use super::api::Attempt;
use super::classify::code;
use super::cluster::Cluster;
use super::config::KafkaConfig;
use super::net::Conn;
use kafka_coordination_transport::error::TransportError;

/// The third-party check's client.
#[derive(Clone)]
pub(crate) struct DescribeClient {
    cluster: Arc<Cluster>,
    timeout: Duration,
}

impl DescribeClient {
    /// A client for `config` on its own connections.
    #[cfg(test)]
    pub fn new(config: &KafkaConfig) -> Result<Self, TransportError> {
        let cluster = Arc::new(Cluster::new(config, "kafka-coordination-describe")?);
        Ok(Self::on(cluster, config))
    }

    /// A client that shares `cluster`'s connections.
    pub fn on(cluster: Arc<Cluster>, config: &KafkaConfig) -> Self {
        DescribeClient {
            cluster,
            timeout: config.request_timeout(),
        }
    }

    /// The role's current pair and transaction state, or `NOT_FOUND`, holding no thread
    /// while it waits.
    pub async fn describe_async(&self, role: &Role) -> Result<LeadershipStatus, TransportError> {
        let deadline = Instant::now() + self.timeout;
        let what = format!("describing role '{role}'");
        let cluster = &self.cluster;
        cluster
            .retry_async(&what, deadline, || {
                let role = role.clone();
                async move {
                    let id = role.as_str().to_owned();
                    cluster
                        .at_coordinator_async(&id, deadline, move |conn| {
                            describe_on(conn, &role, deadline)
                        })
                        .await
                }
            })
            .await
    }

    /// [`describe_async`](Self::describe_async) for many roles: one request per known
    /// coordinator, at most [`BATCH`] ids each. A role whose coordinator is not known yet, or
    /// that the batched request could not answer (a moved coordinator, a lost connection), is
    /// described alone, with the retries of [`describe_async`](Self::describe_async).
    pub async fn describe_many_async(
        &self,
        roles: &[Role],
    ) -> Vec<Result<LeadershipStatus, TransportError>> {
        let mut out: Vec<Option<Result<LeadershipStatus, TransportError>>> =
            (0..roles.len()).map(|_| None).collect();
        let mut by_coordinator: std::collections::BTreeMap<String, Vec<usize>> =
            std::collections::BTreeMap::new();
        // Coordinators not known yet: looked up together first (one request where the broker
        // supports it), not one FindCoordinator per role.
        let ids: Vec<&str> = roles.iter().map(Role::as_str).collect();
        self.cluster
            .find_coordinators(&ids, Instant::now() + self.timeout)
            .await;
        for (i, role) in roles.iter().enumerate() {
            if let Some(addr) = self.cluster.cached_coordinator(role.as_str()) {
                by_coordinator.entry(addr).or_default().push(i);
            }
        }
        for (addr, indexes) in by_coordinator {
            for chunk in indexes.chunks(BATCH) {
                let deadline = Instant::now() + self.timeout;
                let ids: Vec<TransactionalId> = chunk
                    .iter()
                    .map(|&i| TransactionalId(StrBytes::from_string(roles[i].as_str().to_owned())))
                    .collect();
                let answered = self
                    .cluster
                    .on_async(&addr, deadline, move |conn| {
                        if conn.version::<DescribeTransactionsRequest>().is_none() {
                            return Err(Attempt::again("no DescribeTransactions"));
                        }
                        let req =
                            DescribeTransactionsRequest::default().with_transactional_ids(ids);
                        Ok((conn.call(&req, 0, deadline)?, conn.transaction_version()))
                    })
                    .await;
                let Ok((resp, transaction_version)) = answered else {
                    continue;
                };
                for state in resp.transaction_states {
                    let Some(&i) = chunk
                        .iter()
                        .find(|&&i| roles[i].as_str() == state.transactional_id.0.as_str())
                    else {
                        continue;
                    };
                    out[i] = match code::error(state.error_code) {
                        None => Some(Ok(status_of(&state, transaction_version))),
                        Some(code::E::TransactionalIdNotFound) => {
                            Some(Ok(LeadershipStatus::NOT_FOUND))
                        }
                        Some(code::E::TransactionalIdAuthorizationFailed) => {
                            Some(Err(unauthorized(&roles[i])))
                        }
                        // Left to `describe`: it retries, looks the coordinator up again and
                        // names the error.
                        Some(_) => None,
                    };
                }
            }
        }
        let mut answers = Vec::with_capacity(roles.len());
        for (answer, role) in out.into_iter().zip(roles) {
            answers.push(match answer {
                Some(answer) => answer,
                None => self.describe_async(role).await,
            });
        }
        answers
    }
}

/// One DescribeTransactions for `role` on `conn`, a connection to its coordinator.
fn describe_on(
    conn: &mut Conn,
    role: &Role,
    deadline: Instant,
) -> Result<LeadershipStatus, Attempt> {
    if conn.version::<DescribeTransactionsRequest>().is_none() {
        return Err(Attempt::Stop(TransportError::config(format!(
            "the broker at {} does not support DescribeTransactions (API key 65; Kafka 3.0 or \
             newer)",
            conn.addr()
        ))));
    }
    let req = DescribeTransactionsRequest::default().with_transactional_ids(vec![TransactionalId(
        StrBytes::from_string(role.as_str().to_owned()),
    )]);
    let resp = conn.call(&req, 0, deadline)?;
    let Some(state) = resp
        .transaction_states
        .into_iter()
        .find(|s| s.transactional_id.0.as_str() == role.as_str())
    else {
        return Err(Attempt::Stop(TransportError::fatal(format!(
            "DescribeTransactions from {} did not mention role '{role}'",
            conn.addr()
        ))));
    };
    match code::error(state.error_code) {
        None => Ok(status_of(&state, conn.transaction_version())),
        Some(code::E::TransactionalIdNotFound) => Ok(LeadershipStatus::NOT_FOUND),
        Some(code::E::TransactionalIdAuthorizationFailed) => Err(Attempt::Stop(unauthorized(role))),
        // COORDINATOR_LOAD_IN_PROGRESS: again; NOT_COORDINATOR and COORDINATOR_NOT_AVAILABLE:
        // look the coordinator up again (classify.rs).
        Some(e) => {
            let other = e.code();
            Err(Attempt::from_code(
                other,
                format!(
                    "DescribeTransactions for role '{role}' at {} failed with error {other} ({})",
                    conn.addr(),
                    code::name(other)
                ),
            ))
        }
    }
}

/// The most transactional ids one batched DescribeTransactions names.
pub(crate) const BATCH: usize = 256;

fn unauthorized(role: &Role) -> TransportError {
    TransportError::unauthorized(format!(
        "not authorized to describe role '{role}': the principal needs the DESCRIBE ACL on \
         TransactionalId '{role}' (TRANSACTIONAL_ID_AUTHORIZATION_FAILED)"
    ))
    .with_kafka_code(code::E::TransactionalIdAuthorizationFailed.code())
}

/// The status in one answer of DescribeTransactions: the pair, the state, while a
/// transaction is open when the coordinator began it, and the cluster's finalized
/// `transaction.version` as the coordinator's broker announced it.
fn status_of(
    state: &TransactionStateResponse,
    transaction_version: Option<i16>,
) -> LeadershipStatus {
    let parsed = TransactionState::parse(state.transaction_state.as_str());
    let open = matches!(
        parsed,
        TransactionState::Ongoing
            | TransactionState::PrepareCommit
            | TransactionState::PrepareAbort
    );
    let mut status = LeadershipStatus::described(state.producer_id.0, state.producer_epoch, parsed);
    status.transaction_version = transaction_version;
    if open && state.transaction_start_time_ms >= 0 {
        status.with_transaction_started(UnixMillis(state.transaction_start_time_ms))
    } else {
        status
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unreachable_cluster_is_retriable_and_named() {
        // Port 1 on loopback refuses connections.
        let config =
            KafkaConfig::new("127.0.0.1:1", 1).with_request_timeout(Duration::from_millis(300));
        let client = DescribeClient::new(&config).expect("client");
        let role = Role::new("r").expect("role");
        let e = super::super::task_runtime::block_on(client.describe_async(&role))
            .expect_err("unreachable");
        assert!(e.is_retriable());
        assert!(e.message().contains("127.0.0.1:1"), "{}", e.message());
    }
}
