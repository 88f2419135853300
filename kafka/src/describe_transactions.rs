//! DescribeTransactions (built and read in [`crate::api::describe_transactions`]) at the
//! role's transaction coordinator, on the native connections of [`Cluster`] (so on every
//! `security.protocol` they support).

use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_coordination_core::leadership_status::LeadershipStatus;
use kafka_coordination_core::record::Role;

use super::api::describe_transactions::{DescribeRole, DescribeRoles};
use super::cluster::Cluster;
use super::config::KafkaConfig;
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
                            let x = DescribeRole {
                                role: &role,
                                transaction_version: conn.transaction_version(),
                            };
                            conn.exchange(&x, deadline)
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
                let batch: Vec<Role> = chunk.iter().map(|&i| roles[i].clone()).collect();
                let answered = self
                    .cluster
                    .on_async(&addr, deadline, move |conn| {
                        let x = DescribeRoles {
                            roles: &batch,
                            transaction_version: conn.transaction_version(),
                        };
                        conn.exchange(&x, deadline)
                    })
                    .await;
                // A batch that failed as a whole leaves each of its roles to be described
                // alone.
                let Ok(read) = answered else {
                    continue;
                };
                for (&i, answer) in chunk.iter().zip(read) {
                    out[i] = answer;
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

/// The most transactional ids one batched DescribeTransactions names.
pub(crate) const BATCH: usize = 256;

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
