//! An administrator for the ACL tests: SCRAM users and ACLs, made with raw requests (crate
//! `kafka-protocol`) on the test broker's PLAINTEXT listener, whose principal (`User:ANONYMOUS`)
//! is a super user (see scripts/kafka/start.sh).
//!
//! Every change is followed by a wait until the broker itself reports it (DescribeAcls and
//! DescribeUserScramCredentials are answered from the broker's own metadata image), so a test
//! never races the metadata log.
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::fmt;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::alter_user_scram_credentials_request::ScramCredentialUpsertion;
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, CreateAclsRequest, DescribeAclsRequest,
    DescribeUserScramCredentialsRequest, RequestHeader, ResponseHeader,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};

/// How long a change may take to reach the broker's metadata image.
const PROPAGATION: Duration = Duration::from_secs(30);

/// A Kafka resource type (`org.apache.kafka.common.resource.ResourceType` codes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Resource {
    Topic,
    Group,
    Cluster,
    TransactionalId,
}

impl Resource {
    fn code(self) -> i8 {
        match self {
            Resource::Topic => 2,
            Resource::Group => 3,
            Resource::Cluster => 4,
            Resource::TransactionalId => 5,
        }
    }

    fn from_code(code: i8) -> Option<Resource> {
        match code {
            2 => Some(Resource::Topic),
            3 => Some(Resource::Group),
            4 => Some(Resource::Cluster),
            5 => Some(Resource::TransactionalId),
            _ => None,
        }
    }
}

/// A resource pattern type (`PatternType` codes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Pattern {
    Literal,
    Prefixed,
}

impl Pattern {
    fn code(self) -> i8 {
        match self {
            Pattern::Literal => 3,
            Pattern::Prefixed => 4,
        }
    }

    fn from_code(code: i8) -> Option<Pattern> {
        match code {
            3 => Some(Pattern::Literal),
            4 => Some(Pattern::Prefixed),
            _ => None,
        }
    }
}

/// An ACL operation (`AclOperation` codes), named as Kafka's error messages and the library's
/// messages name them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Op {
    Read,
    Write,
    Create,
    Describe,
    DescribeConfigs,
    IdempotentWrite,
}

impl Op {
    fn code(self) -> i8 {
        match self {
            Op::Read => 3,
            Op::Write => 4,
            Op::Create => 5,
            Op::Describe => 8,
            Op::DescribeConfigs => 10,
            Op::IdempotentWrite => 12,
        }
    }

    fn from_code(code: i8) -> Option<Op> {
        match code {
            3 => Some(Op::Read),
            4 => Some(Op::Write),
            5 => Some(Op::Create),
            8 => Some(Op::Describe),
            10 => Some(Op::DescribeConfigs),
            12 => Some(Op::IdempotentWrite),
            _ => None,
        }
    }

    /// The name in upper snake case (`DESCRIBE_CONFIGS`).
    pub fn name(self) -> &'static str {
        match self {
            Op::Read => "READ",
            Op::Write => "WRITE",
            Op::Create => "CREATE",
            Op::Describe => "DESCRIBE",
            Op::DescribeConfigs => "DESCRIBE_CONFIGS",
            Op::IdempotentWrite => "IDEMPOTENT_WRITE",
        }
    }
}

/// One ALLOW ACL for a principal, from any host.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Acl {
    pub resource: Resource,
    pub pattern: Pattern,
    pub name: String,
    pub op: Op,
}

impl Acl {
    pub fn topic(name: &str, op: Op) -> Acl {
        Acl {
            resource: Resource::Topic,
            pattern: Pattern::Literal,
            name: name.to_owned(),
            op,
        }
    }

    pub fn group(name: &str, op: Op) -> Acl {
        Acl {
            resource: Resource::Group,
            pattern: Pattern::Literal,
            name: name.to_owned(),
            op,
        }
    }

    pub fn transactional_id(name: &str, op: Op) -> Acl {
        Acl {
            resource: Resource::TransactionalId,
            pattern: Pattern::Literal,
            name: name.to_owned(),
            op,
        }
    }

    pub fn cluster(op: Op) -> Acl {
        Acl {
            resource: Resource::Cluster,
            pattern: Pattern::Literal,
            name: "kafka-cluster".to_owned(),
            op,
        }
    }

    /// The same ACL for every resource whose name starts with this one's name.
    pub fn prefixed(mut self) -> Acl {
        self.pattern = Pattern::Prefixed;
        self
    }
}

impl fmt::Display for Acl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} {:?} '{}' {}",
            self.pattern,
            self.resource,
            self.name,
            self.op.name()
        )
    }
}

/// The CreateAcls and DescribeAcls version sent: v2, which every supported broker answers
/// (Kafka 3.0 has no v3, Kafka 4.0 no v0).
const ACL_VERSION: i16 = 2;

/// A super user's connection to one broker.
pub struct Admin {
    addr: String,
    stream: TcpStream,
    correlation: i32,
}

impl Admin {
    /// Connects to the first PLAINTEXT listener of `bootstrap`.
    pub fn connect(bootstrap: &str) -> Admin {
        let addr = bootstrap
            .split(',')
            .next()
            .expect("a bootstrap server")
            .trim()
            .to_owned();
        let stream = TcpStream::connect(&addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        Admin {
            addr,
            stream,
            correlation: 0,
        }
    }

    fn call<R: Request>(&mut self, req: &R, version: i16) -> R::Response {
        self.correlation += 1;
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(self.correlation)
            .with_client_id(Some(StrBytes::from_static_str(
                "kafka-coordination-acl-tests",
            )));
        let mut buf = BytesMut::new();
        buf.extend_from_slice(&[0; 4]);
        header
            .encode(&mut buf, R::header_version(version))
            .expect("encode header");
        req.encode(&mut buf, version).expect("encode request");
        let size = i32::try_from(buf.len() - 4).expect("size");
        buf[..4].copy_from_slice(&size.to_be_bytes());
        self.stream.write_all(&buf).expect("write request");
        let mut len = [0u8; 4];
        self.stream.read_exact(&mut len).expect("read size");
        let mut body = vec![0u8; usize::try_from(i32::from_be_bytes(len)).expect("length")];
        self.stream.read_exact(&mut body).expect("read body");
        let mut body = Bytes::from(body);
        let resp_header =
            ResponseHeader::decode(&mut body, R::Response::header_version(version)).expect("hdr");
        assert_eq!(
            resp_header.correlation_id, self.correlation,
            "{}",
            self.addr
        );
        R::Response::decode(&mut body, version).expect("decode response")
    }

    /// Adds (or replaces) SCRAM-SHA-512 credentials for `user` and waits until the broker
    /// knows them.
    pub fn create_user(&mut self, user: &str, password: &str) {
        const SCRAM_SHA_512: i8 = 2;
        let iterations = 4096u32;
        let salt = format!("salt-{user}").into_bytes();
        let mut salted = vec![0u8; 64];
        ring::pbkdf2::derive(
            ring::pbkdf2::PBKDF2_HMAC_SHA512,
            std::num::NonZeroU32::new(iterations).expect("non-zero"),
            &salt,
            password.as_bytes(),
            &mut salted,
        );
        let upsertion = ScramCredentialUpsertion::default()
            .with_name(StrBytes::from_string(user.to_owned()))
            .with_mechanism(SCRAM_SHA_512)
            .with_iterations(iterations as i32)
            .with_salt(Bytes::from(salt))
            .with_salted_password(Bytes::from(salted));
        let resp = self.call(
            &AlterUserScramCredentialsRequest::default().with_upsertions(vec![upsertion]),
            0,
        );
        for r in &resp.results {
            assert_eq!(
                r.error_code, 0,
                "creating user {user}: {:?}",
                r.error_message
            );
        }
        let deadline = Instant::now() + PROPAGATION;
        loop {
            let resp = self.call(
                &DescribeUserScramCredentialsRequest::default().with_users(Some(vec![
                    UserName::default().with_name(StrBytes::from_string(user.to_owned())),
                ])),
                0,
            );
            let known = resp
                .results
                .iter()
                .find(|r| r.user.as_str() == user)
                .filter(|r| r.error_code == 0)
                .map_or(0, |r| r.credential_infos.len());
            if known == 1 {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the broker did not learn user {user}'s credentials in {PROPAGATION:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Grants `acls` to `User:<user>` and waits until the broker enforces exactly the ACLs the
    /// user held before plus these.
    pub fn grant(&mut self, user: &str, acls: &[Acl]) {
        if let Err(e) = self.try_grant(user, acls) {
            panic!("{e}");
        }
    }

    /// [`grant`](Self::grant), or the first ACL the broker refused to create, with its error
    /// code and message (nothing is waited for then).
    pub fn try_grant(&mut self, user: &str, acls: &[Acl]) -> Result<(), String> {
        let principal = format!("User:{user}");
        let mut expected = self.acls_of(user);
        let creations = acls
            .iter()
            .map(|a| {
                expected.insert(a.clone());
                AclCreation::default()
                    .with_resource_type(a.resource.code())
                    .with_resource_name(StrBytes::from_string(a.name.clone()))
                    .with_resource_pattern_type(a.pattern.code())
                    .with_principal(StrBytes::from_string(principal.clone()))
                    .with_host(StrBytes::from_static_str("*"))
                    .with_operation(a.op.code())
                    // ALLOW
                    .with_permission_type(3)
            })
            .collect();
        let resp = self.call(
            &CreateAclsRequest::default().with_creations(creations),
            ACL_VERSION,
        );
        for (r, a) in resp.results.iter().zip(acls) {
            if r.error_code != 0 {
                return Err(format!(
                    "granting {a}: error code {} ({:?})",
                    r.error_code, r.error_message
                ));
            }
        }
        self.wait_for(user, &expected);
        Ok(())
    }

    /// The ALLOW ACLs the broker enforces for `User:<user>`.
    pub fn acls_of(&mut self, user: &str) -> BTreeSet<Acl> {
        let req = DescribeAclsRequest::default()
            // ANY resource, pattern, operation and permission.
            .with_resource_type_filter(1)
            .with_pattern_type_filter(1)
            .with_operation(1)
            .with_permission_type(1)
            .with_principal_filter(Some(StrBytes::from_string(format!("User:{user}"))))
            // Not the empty name and host of the request's defaults: any.
            .with_resource_name_filter(None)
            .with_host_filter(None);
        let resp = self.call(&req, ACL_VERSION);
        assert_eq!(
            resp.error_code, 0,
            "describing ACLs: {:?}",
            resp.error_message
        );
        let mut found = BTreeSet::new();
        for r in &resp.resources {
            for a in &r.acls {
                let (Some(resource), Some(pattern), Some(op)) = (
                    Resource::from_code(r.resource_type),
                    Pattern::from_code(r.pattern_type),
                    Op::from_code(a.operation),
                ) else {
                    panic!("an ACL these tests do not make: {r:?}");
                };
                found.insert(Acl {
                    resource,
                    pattern,
                    name: r.resource_name.to_string(),
                    op,
                });
            }
        }
        found
    }

    fn wait_for(&mut self, user: &str, expected: &BTreeSet<Acl>) {
        let deadline = Instant::now() + PROPAGATION;
        loop {
            let found = self.acls_of(user);
            if &found == expected {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the broker's ACLs for {user} did not become {expected:?} in {PROPAGATION:?}: \
                 {found:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
