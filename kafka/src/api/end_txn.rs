//! EndTxn (API key 26): a role's open transaction committed or aborted at its transaction
//! coordinator.

use kafka_coordination_core::record::Role;
use kafka_coordination_core::token::FencingToken;
use kafka_protocol::messages::{EndTxnRequest, EndTxnResponse, ProducerId, TransactionalId};
use kafka_protocol::protocol::StrBytes;

use super::{txn_error, Attempt, Exchange};
use crate::classify::code;

/// The highest version this client sends (below transaction version 2's v5, which bumps the
/// epoch at every commit).
pub(crate) const MAX_VERSION: i16 = 3;

/// The end (`commit`, else abort) of the open transaction of `role`, pair `token`.
pub(crate) struct EndTxn<'a> {
    pub(crate) role: &'a Role,
    pub(crate) token: FencingToken,
    pub(crate) commit: bool,
}

impl Exchange for EndTxn<'_> {
    type Request = EndTxnRequest;
    /// `true` once the transaction ended as asked, `false` when the coordinator has none open
    /// (INVALID_TXN_STATE).
    type Output = bool;
    const NAME: &'static str = "EndTxn";
    const MAX_VERSION: i16 = MAX_VERSION;

    fn request(&self, _version: i16) -> EndTxnRequest {
        EndTxnRequest::default()
            .with_transactional_id(TransactionalId(StrBytes::from_string(
                self.role.as_str().to_owned(),
            )))
            .with_producer_id(ProducerId(self.token.producer_id))
            .with_producer_epoch(self.token.producer_epoch)
            .with_committed(self.commit)
    }

    fn answer(&self, answer: EndTxnResponse, _version: i16, at: &str) -> Result<bool, Attempt> {
        match code::error(answer.error_code) {
            None => Ok(true),
            Some(code::E::InvalidTxnState) => Ok(false),
            Some(e) => {
                let verb = if self.commit { "commit" } else { "abort" };
                Err(txn_error(
                    self.role,
                    self.token,
                    &format!("EndTxn ({verb})"),
                    at,
                    e.code(),
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn role() -> Role {
        Role::new("orders").unwrap()
    }

    fn answered(error: i16) -> EndTxnResponse {
        EndTxnResponse::default().with_error_code(error)
    }

    #[test]
    fn the_request_names_the_role_its_pair_and_the_outcome() {
        let role = role();
        for commit in [true, false] {
            let req = EndTxn {
                role: &role,
                token: FencingToken::new(7, 3),
                commit,
            }
            .request(MAX_VERSION);
            assert_eq!(req.transactional_id.0.as_str(), "orders");
            assert_eq!((req.producer_id.0, req.producer_epoch), (7, 3));
            assert_eq!(req.committed, commit);
        }
    }

    #[test]
    fn every_answer_is_read() {
        let role = role();
        let x = EndTxn {
            role: &role,
            token: FencingToken::new(7, 3),
            commit: true,
        };
        assert_eq!(x.answer(answered(0), 3, "b:9092").ok(), Some(true));
        // INVALID_TXN_STATE: nothing open at the coordinator.
        assert_eq!(x.answer(answered(48), 3, "b:9092").ok(), Some(false));
        // PRODUCER_FENCED names the verb.
        match x.answer(answered(90), 3, "b:9092") {
            Err(Attempt::Stop(e)) => {
                assert!(e.is_fenced(), "{e}");
                assert!(
                    e.to_string().contains("EndTxn (commit) of role 'orders'"),
                    "{e}"
                );
            }
            _ => panic!("PRODUCER_FENCED must stop the call"),
        }
        let abort = EndTxn { commit: false, ..x };
        // CONCURRENT_TRANSACTIONS: asked again.
        match abort.answer(answered(51), 3, "b:9092") {
            Err(Attempt::Again { why, .. }) => assert!(why.contains("EndTxn (abort)"), "{why}"),
            _ => panic!("CONCURRENT_TRANSACTIONS must be asked again"),
        }
    }
}
