//! DescribeTransactions (API key 65, v0; Kafka 3.0 and newer) at a transaction coordinator:
//! the producer id, epoch and transaction state of transactional ids, each read as its role's
//! [`LeadershipStatus`]. One role is described alone ([`DescribeRole`]), or many roles with the
//! same coordinator in one request ([`DescribeRoles`]).

use kafka_coordination_core::leadership_status::{LeadershipStatus, TransactionState};
use kafka_coordination_core::record::Role;
use kafka_coordination_core::time::UnixMillis;
use kafka_coordination_transport::error::TransportError;
use kafka_protocol::messages::describe_transactions_response::TransactionState as Described;
use kafka_protocol::messages::{
    DescribeTransactionsRequest, DescribeTransactionsResponse, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;

use super::{Attempt, Exchange};
use crate::classify::code;

/// The only version there is.
pub(crate) const MAX_VERSION: i16 = 0;

/// `role` described alone. `transaction_version` is the cluster's finalized
/// `transaction.version` as the coordinator's broker announced it, carried into the status.
pub(crate) struct DescribeRole<'a> {
    pub(crate) role: &'a Role,
    pub(crate) transaction_version: Option<i16>,
}

/// `roles`, whose coordinator is one broker, in one request; `transaction_version` as for
/// [`DescribeRole`].
pub(crate) struct DescribeRoles<'a> {
    pub(crate) roles: &'a [Role],
    pub(crate) transaction_version: Option<i16>,
}

fn request_of<'a>(roles: impl Iterator<Item = &'a Role>) -> DescribeTransactionsRequest {
    DescribeTransactionsRequest::default().with_transactional_ids(
        roles
            .map(|r| TransactionalId(StrBytes::from_string(r.as_str().to_owned())))
            .collect(),
    )
}

impl Exchange for DescribeRole<'_> {
    type Request = DescribeTransactionsRequest;
    /// The role's pair and transaction state, or [`LeadershipStatus::NOT_FOUND`].
    type Output = LeadershipStatus;
    const NAME: &'static str = "DescribeTransactions";
    const MAX_VERSION: i16 = MAX_VERSION;

    fn request(&self, _version: i16) -> DescribeTransactionsRequest {
        request_of(std::iter::once(self.role))
    }

    fn answer(
        &self,
        answer: DescribeTransactionsResponse,
        _version: i16,
        at: &str,
    ) -> Result<LeadershipStatus, Attempt> {
        let role = self.role;
        let Some(state) = answer
            .transaction_states
            .into_iter()
            .find(|s| s.transactional_id.0.as_str() == role.as_str())
        else {
            return Err(Attempt::Stop(TransportError::fatal(format!(
                "DescribeTransactions from {at} did not mention role '{role}'"
            ))));
        };
        match read(&state, role, self.transaction_version) {
            Some(read) => read.map_err(Attempt::Stop),
            // COORDINATOR_LOAD_IN_PROGRESS: again; NOT_COORDINATOR and
            // COORDINATOR_NOT_AVAILABLE: look the coordinator up again (classify.rs).
            None => {
                let error = state.error_code;
                Err(Attempt::from_code(
                    error,
                    format!(
                        "DescribeTransactions for role '{role}' at {at} failed with error \
                         {error} ({})",
                        code::name(error)
                    ),
                ))
            }
        }
    }

    fn unsupported(&self, at: &str) -> Attempt {
        Attempt::Stop(TransportError::config(format!(
            "the broker at {at} does not support DescribeTransactions (API key 65; Kafka 3.0 or \
             newer)"
        )))
    }
}

impl Exchange for DescribeRoles<'_> {
    type Request = DescribeTransactionsRequest;
    /// What the answer says of each of the roles, in order: `None` where it does not settle
    /// the role (not mentioned, or an error that needs the retries of [`DescribeRole`], which
    /// also names it).
    type Output = Vec<Option<Result<LeadershipStatus, TransportError>>>;
    const NAME: &'static str = "DescribeTransactions";
    const MAX_VERSION: i16 = MAX_VERSION;

    fn request(&self, _version: i16) -> DescribeTransactionsRequest {
        request_of(self.roles.iter())
    }

    fn answer(
        &self,
        answer: DescribeTransactionsResponse,
        _version: i16,
        _at: &str,
    ) -> Result<Self::Output, Attempt> {
        let mut out: Self::Output = self.roles.iter().map(|_| None).collect();
        for state in answer.transaction_states {
            let id = state.transactional_id.0.as_str();
            let Some(i) = self.roles.iter().position(|r| r.as_str() == id) else {
                continue;
            };
            out[i] = read(&state, &self.roles[i], self.transaction_version);
        }
        Ok(out)
    }

    /// Each role is then described alone, which names the missing API.
    fn unsupported(&self, _at: &str) -> Attempt {
        Attempt::again("no DescribeTransactions")
    }
}

/// What one role's entry says when its error code settles it: its status, not found, or
/// refused; `None` for any other error code.
fn read(
    state: &Described,
    role: &Role,
    transaction_version: Option<i16>,
) -> Option<Result<LeadershipStatus, TransportError>> {
    match code::error(state.error_code) {
        None => Some(Ok(status_of(state, transaction_version))),
        Some(code::E::TransactionalIdNotFound) => Some(Ok(LeadershipStatus::NOT_FOUND)),
        Some(code::E::TransactionalIdAuthorizationFailed) => Some(Err(unauthorized(role))),
        Some(_) => None,
    }
}

fn unauthorized(role: &Role) -> TransportError {
    TransportError::unauthorized(format!(
        "not authorized to describe role '{role}': the principal needs the DESCRIBE ACL on \
         TransactionalId '{role}' (TRANSACTIONAL_ID_AUTHORIZATION_FAILED)"
    ))
    .with_kafka_code(code::E::TransactionalIdAuthorizationFailed.code())
}

/// The status in one entry of the answer: the pair, the state, while a transaction is open
/// when the coordinator began it, and `transaction_version`.
fn status_of(state: &Described, transaction_version: Option<i16>) -> LeadershipStatus {
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
    use kafka_protocol::messages::ProducerId;

    fn role(name: &str) -> Role {
        Role::new(name).unwrap()
    }

    fn entry(id: &str, error: i16, state: &'static str, started: i64) -> Described {
        Described::default()
            .with_transactional_id(TransactionalId(StrBytes::from_string(id.to_owned())))
            .with_error_code(error)
            .with_transaction_state(StrBytes::from_static_str(state))
            .with_producer_id(ProducerId(7))
            .with_producer_epoch(3)
            .with_transaction_start_time_ms(started)
    }

    fn answered(entries: Vec<Described>) -> DescribeTransactionsResponse {
        DescribeTransactionsResponse::default().with_transaction_states(entries)
    }

    fn one(answer: DescribeTransactionsResponse) -> Result<LeadershipStatus, Attempt> {
        let r = role("orders");
        DescribeRole {
            role: &r,
            transaction_version: Some(2),
        }
        .answer(answer, MAX_VERSION, "b:9092")
    }

    #[test]
    fn the_requests_name_the_roles() {
        let r = role("orders");
        let req = DescribeRole {
            role: &r,
            transaction_version: None,
        }
        .request(MAX_VERSION);
        let ids: Vec<&str> = req.transactional_ids.iter().map(|i| i.0.as_str()).collect();
        assert_eq!(ids, ["orders"]);
        let roles = [role("a"), role("b")];
        let req = DescribeRoles {
            roles: &roles,
            transaction_version: None,
        }
        .request(MAX_VERSION);
        let ids: Vec<&str> = req.transactional_ids.iter().map(|i| i.0.as_str()).collect();
        assert_eq!(ids, ["a", "b"]);
    }

    #[test]
    fn a_described_role_reads_as_its_pair_state_and_start() {
        let open = one(answered(vec![entry("orders", 0, "Ongoing", 1_000)]))
            .ok()
            .expect("described");
        let mut expected = LeadershipStatus::described(7, 3, TransactionState::Ongoing)
            .with_transaction_started(UnixMillis(1_000));
        expected.transaction_version = Some(2);
        assert_eq!(open, expected);
        // A transaction not open has no start, whatever the field says.
        let done = one(answered(vec![entry("orders", 0, "CompleteCommit", 1_000)]))
            .ok()
            .expect("described");
        let mut expected = LeadershipStatus::described(7, 3, TransactionState::CompleteCommit);
        expected.transaction_version = Some(2);
        assert_eq!(done, expected);
    }

    #[test]
    fn each_error_of_a_single_describe_is_read() {
        assert_eq!(
            one(answered(vec![entry("orders", 105, "", -1)])).ok(),
            Some(LeadershipStatus::NOT_FOUND)
        );
        match one(answered(vec![entry("orders", 53, "", -1)])) {
            Err(Attempt::Stop(e)) => {
                assert!(e.to_string().contains("DESCRIBE ACL"), "{e}");
                assert_eq!(e.kafka_code(), Some(53));
            }
            _ => panic!("a refusal stops"),
        }
        match one(answered(vec![entry("other", 0, "Empty", -1)])) {
            Err(Attempt::Stop(e)) => {
                assert!(
                    e.to_string().contains("did not mention role 'orders'"),
                    "{e}"
                )
            }
            _ => panic!("an answer without the role stops"),
        }
        match one(answered(vec![entry("orders", 16, "", -1)])) {
            Err(Attempt::Again {
                relookup: true,
                code: Some(16),
                why,
            }) => assert!(why.contains("at b:9092 failed with error 16"), "{why}"),
            _ => panic!("NOT_COORDINATOR looks the coordinator up again"),
        }
        let r = role("orders");
        let x = DescribeRole {
            role: &r,
            transaction_version: None,
        };
        assert!(matches!(x.unsupported("b:9092"), Attempt::Stop(_)));
    }

    #[test]
    fn a_batch_settles_what_it_can_and_leaves_the_rest() {
        let roles = [role("a"), role("b"), role("c"), role("d"), role("e")];
        let x = DescribeRoles {
            roles: &roles,
            transaction_version: None,
        };
        let out = x
            .answer(
                answered(vec![
                    entry("a", 0, "Empty", -1),
                    entry("b", 105, "", -1),
                    entry("c", 53, "", -1),
                    entry("d", 14, "", -1),
                    entry("stranger", 0, "Empty", -1),
                ]),
                MAX_VERSION,
                "b:9092",
            )
            .ok()
            .expect("read");
        assert_eq!(out.len(), 5);
        assert_eq!(
            out[0].as_ref().map(|r| r.as_ref().ok().cloned()),
            Some(Some(LeadershipStatus::described(
                7,
                3,
                TransactionState::Empty
            )))
        );
        assert_eq!(
            out[1].as_ref().map(|r| r.as_ref().ok().cloned()),
            Some(Some(LeadershipStatus::NOT_FOUND))
        );
        assert!(matches!(&out[2], Some(Err(e)) if e.kafka_code() == Some(53)));
        // COORDINATOR_LOAD_IN_PROGRESS, and a role not mentioned: described alone.
        assert!(out[3].is_none() && out[4].is_none());
        assert!(matches!(x.unsupported("b:9092"), Attempt::Again { .. }));
    }
}
