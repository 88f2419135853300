//! AddOffsetsToTxn (API key 25): a consumer group's offsets join the role's open transaction,
//! asked of the role's transaction coordinator before the offsets themselves go to the group's
//! coordinator (TxnOffsetCommit).

use kafka_coordination_core::record::Role;
use kafka_coordination_core::token::FencingToken;
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, GroupId, ProducerId, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;

use super::find_coordinator::group_unauthorized;
use super::{txn_error, Attempt, Exchange};
use crate::classify::code;

/// The highest version this client sends (below transaction version 2's v4).
pub(crate) const MAX_VERSION: i16 = 3;

/// Group `group`'s offsets joining the open transaction of `role` (pair `token`).
pub(crate) struct AddOffsetsToTxn<'a> {
    pub(crate) role: &'a Role,
    pub(crate) token: FencingToken,
    pub(crate) group: &'a str,
}

impl Exchange for AddOffsetsToTxn<'_> {
    type Request = AddOffsetsToTxnRequest;
    type Output = ();
    const NAME: &'static str = "AddOffsetsToTxn";
    const MAX_VERSION: i16 = MAX_VERSION;

    fn request(&self, _version: i16) -> AddOffsetsToTxnRequest {
        AddOffsetsToTxnRequest::default()
            .with_transactional_id(TransactionalId(StrBytes::from_string(
                self.role.as_str().to_owned(),
            )))
            .with_producer_id(ProducerId(self.token.producer_id))
            .with_producer_epoch(self.token.producer_epoch)
            .with_group_id(GroupId(StrBytes::from_string(self.group.to_owned())))
    }

    fn answer(
        &self,
        answer: AddOffsetsToTxnResponse,
        _version: i16,
        at: &str,
    ) -> Result<(), Attempt> {
        let error = answer.error_code;
        match code::error(error) {
            None => Ok(()),
            Some(code::E::GroupAuthorizationFailed) => {
                Err(Attempt::Stop(group_unauthorized(self.group)))
            }
            Some(_) => Err(txn_error(
                self.role,
                self.token,
                &format!("AddOffsetsToTxn (group '{}')", self.group),
                at,
                error,
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_coordination_transport::error::ErrorKind;

    const AT: &str = "b:9092";

    fn role() -> Role {
        Role::new("billing").unwrap()
    }

    fn answered(error: i16) -> AddOffsetsToTxnResponse {
        AddOffsetsToTxnResponse::default().with_error_code(error)
    }

    #[test]
    fn the_request_names_the_role_its_pair_and_the_group() {
        let role = role();
        let req = AddOffsetsToTxn {
            role: &role,
            token: FencingToken::new(7, 2),
            group: "payments",
        }
        .request(MAX_VERSION);
        assert_eq!(req.transactional_id.0.as_str(), "billing");
        assert_eq!((req.producer_id.0, req.producer_epoch), (7, 2));
        assert_eq!(req.group_id.0.as_str(), "payments");
    }

    #[test]
    fn every_answer_is_read() {
        let role = role();
        let x = AddOffsetsToTxn {
            role: &role,
            token: FencingToken::new(7, 2),
            group: "payments",
        };
        assert!(x.answer(answered(0), MAX_VERSION, AT).is_ok());
        // GROUP_AUTHORIZATION_FAILED names the group's ACL.
        match x.answer(answered(30), MAX_VERSION, AT) {
            Err(Attempt::Stop(e)) => {
                assert_eq!(e.kind(), ErrorKind::Unauthorized);
                assert!(e.message().contains("READ ACL on Group 'payments'"), "{e}");
            }
            _ => panic!("GROUP_AUTHORIZATION_FAILED must stop the call"),
        }
        // Any other error is a transactional call's: fenced here.
        match x.answer(answered(47), MAX_VERSION, AT) {
            Err(Attempt::Stop(e)) => {
                assert_eq!(e.kind(), ErrorKind::Fenced);
                assert!(
                    e.message()
                        .starts_with("AddOffsetsToTxn (group 'payments') of role 'billing'"),
                    "{e}"
                );
            }
            _ => panic!("INVALID_PRODUCER_EPOCH must stop the call"),
        }
        // CONCURRENT_TRANSACTIONS: asked again.
        assert!(matches!(
            x.answer(answered(51), MAX_VERSION, AT),
            Err(Attempt::Again {
                relookup: false,
                ..
            })
        ));
    }
}
