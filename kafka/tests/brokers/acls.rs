//! The Kafka ACLs a member and an observer need, proven on a real broker that enforces them
//! (StandardAuthorizer on the SASL_SSL listener of scripts/kafka/start.sh).
//!
//! Every test makes fresh SCRAM users (AlterUserScramCredentials, as the super user on the
//! PLAINTEXT listener), grants them ACLs and waits until the broker enforces them, so the tests
//! share nothing but the broker and the two topics made once per run.
//!
//! * `the_documented_acls_suffice_for_a_whole_life`: exactly the ACLs of the guide's operating page, nothing else
//!   (no Describe, no Create, nothing on the Cluster), carry two members and an observer
//!   through an election, a guarded write, a resign and a hand-over.
//! * one `without_*` test per row of that table: everything but that row, and the
//!   member (or observer) fails with [`ErrorKind::Unauthorized`] whose message names the
//!   missing operation and resource; granting the row then makes it work.
//! * `without_read_on_an_input_topic_an_offset_commit_names_it`: offsets committed in a
//!   guarded write need READ on the input topic and the group, and the refusal says so.
//!
//! Needs `KAFKA_BOOTSTRAP`, `KAFKA_SASL_SSL_BOOTSTRAP` and `KAFKA_SSL_CA` (exported by
//! scripts/kafka/start.sh, passed on by scripts/kafka/with-broker.sh); without them every test
//! says so loudly and returns.

use kafka_coordination_test_support as support;

use kafka_coordination_test_support::acls;

use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use acls::{Acl, Admin, Op};
use support::{loud, transport_with, unique, PARTITIONS};

use kafka_coordination::blocking;
use kafka_coordination::core::record::Role;
use kafka_coordination::describe::{describe_leadership, describe_role_state};
use kafka_coordination::error::{ErrorKind, TransportError};
use kafka_coordination::leadership::Leadership;
use kafka_coordination::transport::Coordinator;
use kafka_coordination::transport::Wait;
use kafka_coordination::{Error, GuardedRecord, Options, SystemClock};
use kafka_coordination_kafka::{KafkaConfig, KafkaTransport};

const LEASE: Duration = Duration::from_secs(2);
const RENEW: Duration = Duration::from_millis(500);
/// A bound for an election with nobody in the way, or for a refusal.
const PROMPT: Duration = Duration::from_secs(30);

/// The broker, and the state and data topics every test of this run shares.
struct World {
    plaintext: String,
    sasl_ssl: String,
    ca: String,
    /// The state topic (compacted, [`PARTITIONS`] partitions), made by the super user.
    state: String,
    /// A topic for guarded writes, made by the super user.
    data: String,
}

fn world() -> Option<&'static World> {
    static WORLD: OnceLock<Option<World>> = OnceLock::new();
    WORLD
        .get_or_init(|| {
            let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
            let (Some(plaintext), Some(sasl_ssl), Some(ca)) = (
                var("KAFKA_BOOTSTRAP"),
                var("KAFKA_SASL_SSL_BOOTSTRAP"),
                var("KAFKA_SSL_CA"),
            ) else {
                loud(
                    "KAFKA_BOOTSTRAP, KAFKA_SASL_SSL_BOOTSTRAP or KAFKA_SSL_CA is not set, so the \
                     Kafka ACL tests ran against nothing. Run: scripts/kafka/with-broker.sh \
                     cargo test -p kafka-coordination-kafka --test brokers acls::",
                );
                return None;
            };
            let base = unique("acl");
            let w = World {
                state: format!("{base}-state"),
                data: format!("{base}-data"),
                plaintext,
                sasl_ssl,
                ca,
            };
            // The super user (User:ANONYMOUS on PLAINTEXT) makes both topics.
            for topic in [&w.state, &w.data] {
                drop(transport_with(
                    KafkaConfig::new(w.plaintext.clone(), PARTITIONS).with_topic(topic.clone()),
                ));
            }
            Some(w)
        })
        .as_ref()
}

/// The super user's connection (one at a time: it is a single request/response stream).
fn admin(w: &World) -> std::sync::MutexGuard<'static, Admin> {
    static ADMIN: OnceLock<Mutex<Admin>> = OnceLock::new();
    ADMIN
        .get_or_init(|| Mutex::new(Admin::connect(&w.plaintext)))
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

impl World {
    /// A fresh SCRAM user (unknown to every ACL), returned with its password.
    fn user(&self, prefix: &str) -> (String, String) {
        let user = unique(prefix);
        let password = format!("{user}-secret");
        admin(self).create_user(&user, &password);
        (user, password)
    }

    /// SASL_SSL with SCRAM-SHA-512 as `user`, on the shared state topic.
    fn config(&self, (user, password): &(String, String)) -> KafkaConfig {
        KafkaConfig::new(self.sasl_ssl.clone(), PARTITIONS)
            .with_topic(self.state.clone())
            .with_property("security.protocol", "SASL_SSL")
            .with_property("sasl.mechanism", "SCRAM-SHA-512")
            .with_property("sasl.username", user.clone())
            .with_property("sasl.password", password.clone())
            .with_property("ssl.ca.location", self.ca.clone())
            .with_request_timeout(Duration::from_secs(10))
    }

    fn grant(&self, (user, _): &(String, String), acls: &[Acl]) {
        admin(self).grant(user, acls);
    }
}

/// The member's rows of the ACL table (docs/guide/operating.md), one ACL each, for `role`.
struct MemberAcls {
    /// The state topic: reads (Fetch, ListOffsets, DescribeProducers).
    state_read: Acl,
    /// The state topic: registrations and lease transactions.
    state_write: Acl,
    /// The state topic: the topic check reads its cleanup.policy.
    state_describe_configs: Acl,
    /// The role's transactional id: the epoch (InitProducerId), the lease transactions.
    role_write: Acl,
    /// The topic of the guarded writes.
    data_write: Acl,
}

impl MemberAcls {
    fn new(w: &World, role: &str) -> MemberAcls {
        MemberAcls {
            state_read: Acl::topic(&w.state, Op::Read),
            state_write: Acl::topic(&w.state, Op::Write),
            state_describe_configs: Acl::topic(&w.state, Op::DescribeConfigs),
            role_write: Acl::transactional_id(role, Op::Write),
            data_write: Acl::topic(&w.data, Op::Write),
        }
    }

    fn all(&self) -> Vec<Acl> {
        vec![
            self.state_read.clone(),
            self.state_write.clone(),
            self.state_describe_configs.clone(),
            self.role_write.clone(),
            self.data_write.clone(),
        ]
    }
}

/// The observer's rows (describe_leadership, describe_role_state), one ACL each, for `role`.
struct ObserverAcls {
    /// describe_leadership: FindCoordinator and DescribeTransactions.
    role_describe: Acl,
    /// describe_role_state: the topic check's metadata, Fetch.
    state_read: Acl,
    /// describe_role_state: the topic check's cleanup.policy.
    state_describe_configs: Acl,
}

impl ObserverAcls {
    fn new(w: &World, role: &str) -> ObserverAcls {
        ObserverAcls {
            role_describe: Acl::transactional_id(role, Op::Describe),
            state_read: Acl::topic(&w.state, Op::Read),
            state_describe_configs: Acl::topic(&w.state, Op::DescribeConfigs),
        }
    }

    fn all(&self) -> Vec<Acl> {
        vec![
            self.role_describe.clone(),
            self.state_read.clone(),
            self.state_describe_configs.clone(),
        ]
    }
}

/// `acls` without `skipped`.
fn all_but(acls: Vec<Acl>, skipped: &Acl) -> Vec<Acl> {
    let rest: Vec<Acl> = acls.into_iter().filter(|a| a != skipped).collect();
    assert!(!rest.is_empty());
    rest
}

fn options() -> Options {
    Options::new()
        .lease_duration(LEASE)
        .renew_interval(RENEW)
        .challenge_stagger(Duration::from_millis(300))
        .clock(SystemClock)
}

fn record<'a>(w: &'a World, value: &'a [u8]) -> GuardedRecord<'a> {
    GuardedRecord {
        topic: &w.data,
        partition: 0,
        key: Some(b"k"),
        value: Some(value),
        headers: &[],
    }
}

/// Starts a candidacy and waits for its election (or its error).
fn elect(t: KafkaTransport, role: &str, member: &str) -> Result<Leadership, Error> {
    let candidacy = blocking::start(t, role, member, options())?;
    match candidacy.elected_blocking_timeout(PROMPT) {
        Ok(outcome) => outcome,
        Err(c) => panic!(
            "member {member} was neither elected nor refused in {PROMPT:?}: {:?}",
            c.snapshot()
        ),
    }
}

/// A member's whole life up to its first guarded write: the topic check, the election, a
/// guarded write, a resign.
fn member_life(w: &World, t: KafkaTransport, role: &str) -> Result<(), Error> {
    t.ensure_topic().map_err(Error::Transport)?;
    let leader = elect(t, role, "m")?;
    let written = leader.guarded_write_blocking(&[record(w, b"guarded")]);
    if written.is_ok() {
        assert!(leader.resign_blocking().is_ok(), "a clean resign");
    }
    written.map(drop)
}

/// What an observer does: both describe calls.
fn observe(t: &KafkaTransport, role: &str) -> Result<(), Error> {
    describe_leadership(t, role)?;
    describe_role_state(t, role)?;
    Ok(())
}

fn unauthorized(outcome: Result<(), Error>) -> TransportError {
    match outcome {
        Err(Error::Transport(e)) if e.kind() == ErrorKind::Unauthorized => e,
        other => panic!("expected an authorization error, got {other:?}"),
    }
}

/// Asserts that `e`'s message names `acl`'s operation and resource (`Topic 'name'`,
/// `TransactionalId 'name'`).
fn assert_names(e: &TransportError, acl: &Acl) {
    let m = e.message();
    let resource = format!("{:?} '{}'", acl.resource, acl.name);
    let words: Vec<&str> = m
        .split(|c: char| !(c.is_ascii_uppercase() || c == '_'))
        .collect();
    assert!(
        words.contains(&acl.op.name()) && m.contains(&resource),
        "the message should name {} on {resource}: {m}",
        acl.op.name()
    );
    assert_eq!(e.troubleshooting_anchor(), "missing-acls", "{m}");
}

// ---- the whole life on exactly the documented ACLs --------------------------------------------

#[test]
fn the_documented_acls_suffice_for_a_whole_life() {
    let Some(w) = world() else { return };
    let base = unique("acl-life");
    let role = format!("{base}-role");

    // Member a: the literal ACLs of the table.
    let a_user = w.user("acl-a");
    w.grant(&a_user, &MemberAcls::new(w, &role).all());
    // Member b: the same rows as prefixed ACLs (a family of roles; topics by prefix).
    let b_user = w.user("acl-b");
    let b_acls: Vec<Acl> = MemberAcls::new(w, &role)
        .all()
        .into_iter()
        .map(|mut a| {
            // A prefix of each name that no other test's names start with.
            a.name.truncate(a.name.len() - 3);
            a.prefixed()
        })
        .collect();
    w.grant(&b_user, &b_acls);
    // The observer: the read-only rows.
    let o_user = w.user("acl-o");
    w.grant(&o_user, &ObserverAcls::new(w, &role).all());

    let a_transport = KafkaTransport::connect(w.config(&a_user)).expect("a's topic check");
    let a = elect(a_transport, &role, "a").expect("a elected on the documented ACLs");
    a.guarded_write_blocking(&[record(w, b"from a")])
        .expect("a's guarded write");

    let observer = KafkaTransport::new(w.config(&o_user)).expect("observer");
    let status = describe_leadership(&observer, &role).expect("describe_leadership");
    assert!(
        status.authoritative(&a.token()),
        "{status:?} vs {}",
        a.token()
    );
    let state = describe_role_state(&observer, &role).expect("describe_role_state");
    assert!(state.roster().any(|(m, _)| m.as_str() == "a"), "{state:?}");

    // b takes over when a resigns.
    let b = blocking::start(
        KafkaTransport::new(w.config(&b_user)).expect("b"),
        &role,
        "b",
        options(),
    )
    .expect("start b");
    assert!(a.resign_blocking().is_ok(), "a clean resign");
    let b = match b.elected_blocking_timeout(PROMPT) {
        Ok(Ok(b)) => b,
        Ok(Err(e)) => panic!("b on prefixed ACLs failed: {e}"),
        Err(c) => panic!("b not elected in {PROMPT:?}: {:?}", c.snapshot()),
    };
    assert!(b.term() > a.term());
    b.guarded_write_blocking(&[record(w, b"from b")])
        .expect("b's guarded write");
    match a.guarded_write_blocking(&[record(w, b"from the resigned a")]) {
        Err(Error::Fenced { token }) => assert_eq!(token, a.token()),
        other => panic!("expected a's write to be fenced, got {other:?}"),
    }
    let status = describe_leadership(&observer, &role).expect("describe_leadership");
    assert!(status.authoritative(&b.token()), "{status:?}");
    let deadline = std::time::Instant::now() + PROMPT;
    loop {
        let state = describe_role_state(&observer, &role).expect("role state");
        if state
            .lease()
            .is_some_and(|l| l.lease.member.as_str() == "b")
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the observer never read b's lease: {state:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(b.resign_blocking().is_ok(), "b resigns cleanly");
    let status = describe_leadership(&observer, &role).expect("describe_leadership");
    assert!(!status.authoritative(&b.token()), "{status:?}");
}

// ---- each member row is needed, and its absence is named --------------------------------------

/// Grants a fresh member every member row but the one `pick` chooses, checks that its life
/// fails with an authorization error naming that ACL, grants it, and checks that a new life
/// succeeds.
fn member_needs(pick: fn(&MemberAcls) -> &Acl) {
    let Some(w) = world() else { return };
    let role = unique("acl-row-role");
    let acls = MemberAcls::new(w, &role);
    let skipped = pick(&acls).clone();
    let user = w.user("acl-m");
    w.grant(&user, &all_but(acls.all(), &skipped));
    let t = KafkaTransport::new(w.config(&user)).expect("transport");
    let e = unauthorized(member_life(w, t, &role));
    eprintln!("without {skipped}: {e}");
    assert_names(&e, &skipped);

    w.grant(&user, &[skipped]);
    let t = KafkaTransport::new(w.config(&user)).expect("transport");
    member_life(w, t, &role).expect("the whole life once the row is granted");
}

#[test]
fn without_read_on_the_state_topic_a_member_is_told_so() {
    member_needs(|a| &a.state_read);
}

#[test]
fn without_write_on_the_state_topic_a_member_is_told_so() {
    member_needs(|a| &a.state_write);
}

#[test]
fn without_describe_configs_on_the_state_topic_a_member_is_told_so() {
    member_needs(|a| &a.state_describe_configs);
}

#[test]
fn without_write_on_the_transactional_id_a_member_is_told_so() {
    member_needs(|a| &a.role_write);
}

#[test]
fn without_write_on_the_guarded_topic_a_guarded_write_is_told_so() {
    member_needs(|a| &a.data_write);
}

/// Offsets committed in a guarded write's transaction (TxnOffsetCommit) need READ on each input
/// topic (and READ on the group), not WRITE: a member with WRITE but not READ on its input topic
/// is told to grant READ on that topic, and the group is named; once READ is granted, the same
/// leader commits.
#[test]
fn without_read_on_an_input_topic_an_offset_commit_names_it() {
    let Some(w) = world() else { return };
    let role = unique("acl-offsets");
    let group = unique("acl-group");
    let acls = MemberAcls::new(w, &role);
    let user = w.user("acl-m");
    let mut granted = acls.all();
    granted.push(Acl::group(&group, Op::Read));
    w.grant(&user, &granted);
    let t = KafkaTransport::new(w.config(&user)).expect("transport");
    t.ensure_topic().expect("the topic check");
    let leader = elect(t, &role, "m").expect("elected");
    let commit = || {
        let consumed = [kafka_coordination_kafka::ConsumedOffset {
            topic: &w.data,
            partition: 0,
            next_offset: 1,
            metadata: None,
        }];
        leader
            .guarded_write_with_offsets_blocking(
                &[record(w, b"with offsets")],
                kafka_coordination_kafka::GroupOffsets {
                    group: &group,
                    offsets: &consumed,
                },
            )
            .map(drop)
    };
    let e = unauthorized(commit());
    eprintln!("{e}");
    let input = Acl::topic(&w.data, Op::Read);
    assert_names(&e, &input);
    assert!(e.message().contains("TxnOffsetCommit"), "{e}");
    assert!(e.message().contains(&format!("Group '{group}'")), "{e}");
    w.grant(&user, &[input]);
    commit().expect("the commit once READ on the input topic is granted");
    assert!(leader.resign_blocking().is_ok(), "a clean resign");
}

#[test]
fn with_describe_but_not_write_on_the_transactional_id_the_epoch_is_refused() {
    let Some(w) = world() else { return };
    let role = unique("acl-describe-only");
    let acls = MemberAcls::new(w, &role);
    let user = w.user("acl-m");
    let mut granted = all_but(acls.all(), &acls.role_write);
    granted.push(Acl::transactional_id(&role, Op::Describe));
    w.grant(&user, &granted);
    let t = KafkaTransport::new(w.config(&user)).expect("transport");
    let e = unauthorized(member_life(w, t, &role));
    eprintln!("{e}");
    assert_names(&e, &acls.role_write);
    assert!(e.message().contains("InitProducerId"), "{e}");
}

#[test]
fn without_any_write_acl_the_registration_producer_names_the_state_topic() {
    // No WRITE on any topic: the idempotent registration producer is refused its producer id
    // (the broker accepts WRITE on any topic in place of IDEMPOTENT_WRITE on the cluster).
    let Some(w) = world() else { return };
    let role = unique("acl-no-write");
    let acls = MemberAcls::new(w, &role);
    let user = w.user("acl-m");
    w.grant(
        &user,
        &[
            acls.state_read.clone(),
            acls.state_describe_configs.clone(),
            acls.role_write.clone(),
        ],
    );
    let t = KafkaTransport::new(w.config(&user)).expect("transport");
    let e = unauthorized(member_life(w, t, &role));
    eprintln!("{e}");
    assert_names(&e, &acls.state_write);
}

// ---- each observer row is needed -------------------------------------------------------------

/// The observer's two calls.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Call {
    DescribeLeadership,
    DescribeRoleState,
}

/// Grants a fresh observer every observer row but the one `pick` chooses; checks that
/// `needing` fails with an authorization error naming that ACL while the other call works;
/// grants it and checks that both calls work.
fn observer_needs(pick: fn(&ObserverAcls) -> &Acl, needing: Call) {
    let Some(w) = world() else { return };
    let role = unique("acl-obs-role");
    let acls = ObserverAcls::new(w, &role);
    let skipped = pick(&acls).clone();
    let user = w.user("acl-o");
    w.grant(&user, &all_but(acls.all(), &skipped));
    let t = KafkaTransport::new(w.config(&user)).expect("transport");
    let leadership = describe_leadership(&t, &role).map(drop);
    let state = describe_role_state(&t, &role).map(drop);
    let (failed, other) = match needing {
        Call::DescribeLeadership => (leadership, state),
        Call::DescribeRoleState => (state, leadership),
    };
    other.unwrap_or_else(|e| {
        panic!("only {needing:?} needs the row, but the other call failed: {e}")
    });
    let e = unauthorized(failed);
    eprintln!("observer without {skipped}: {e}");
    assert_names(&e, &skipped);

    w.grant(&user, &[skipped]);
    let t = KafkaTransport::new(w.config(&user)).expect("transport");
    observe(&t, &role).expect("both describe calls once the row is granted");
}

#[test]
fn without_describe_on_the_transactional_id_an_observer_is_told_so() {
    observer_needs(|a| &a.role_describe, Call::DescribeLeadership);
}

#[test]
fn without_read_on_the_state_topic_an_observer_is_told_so() {
    observer_needs(|a| &a.state_read, Call::DescribeRoleState);
}

#[test]
fn without_describe_configs_on_the_state_topic_an_observer_is_told_so() {
    observer_needs(|a| &a.state_describe_configs, Call::DescribeRoleState);
}

// ---- the rows a member needs only sometimes ------------------------------------------------

#[test]
fn create_topic_needs_create_on_the_topic_or_the_cluster() {
    let Some(w) = world() else { return };
    // The state-topic rows, on the topic to be made (the check after the creation reads it).
    let state_rows = |topic: &str| {
        [
            Acl::topic(topic, Op::Read),
            Acl::topic(topic, Op::Write),
            Acl::topic(topic, Op::DescribeConfigs),
        ]
    };
    // CREATE on the Cluster is enough too.
    let topic = unique("acl-created-by-cluster-acl");
    let user = w.user("acl-c");
    w.grant(
        &user,
        &[&state_rows(&topic)[..], &[Acl::cluster(Op::Create)]].concat(),
    );
    let created = KafkaTransport::new(w.config(&user).with_topic(topic.clone()))
        .expect("transport")
        .create_topic(1, None)
        .expect("created with CREATE on the Cluster");
    assert!(created);

    let topic = unique("acl-created");
    let user = w.user("acl-c");
    w.grant(&user, &state_rows(&topic));
    let config = w.config(&user).with_topic(topic.clone());
    let e = KafkaTransport::new(config.clone())
        .expect("transport")
        .create_topic(1, None)
        .map(drop)
        .map_err(Error::Transport);
    let e = unauthorized(e);
    eprintln!("{e}");
    assert_names(&e, &Acl::topic(&topic, Op::Create));

    w.grant(&user, &[Acl::topic(&topic, Op::Create)]);
    let created = KafkaTransport::new(config)
        .expect("transport")
        .create_topic(1, None)
        .expect("created once CREATE is granted");
    assert!(created);
}

#[test]
fn after_a_failed_produce_the_next_guarded_write_needs_read_on_the_topic() {
    // A produce that did not succeed (refused, or its answer lost) leaves the partition's
    // sequence unknown to the session; the next write to that partition learns it from the
    // partition leader (DescribeProducers), which needs READ on the topic. Here the broker
    // refuses a record without a key on a compacted topic (INVALID_RECORD).
    let Some(w) = world() else { return };
    let topic = unique("acl-relearn");
    KafkaTransport::new(KafkaConfig::new(w.plaintext.clone(), 1).with_topic(topic.clone()))
        .expect("admin transport")
        .create_topic(1, None)
        .expect("a compacted topic");
    let role = unique("acl-relearn-role");
    let user = w.user("acl-m");
    w.grant(
        &user,
        &[
            Acl::transactional_id(&role, Op::Write),
            Acl::topic(&topic, Op::Write),
        ],
    );
    let t = KafkaTransport::new(
        w.config(&user)
            .with_operation_timeout(Duration::from_secs(3)),
    )
    .expect("transport");
    // The transaction timeout outlives the failed write: the coordinator must not abort it.
    let token = t
        .acquire_epoch(
            &Role::new(role.clone()).expect("role"),
            Duration::from_secs(60),
        )
        .expect("acquire");
    let write = |key: Option<&'static [u8]>| {
        t.guarded_write(
            token,
            &[GuardedRecord {
                topic: &topic,
                partition: 0,
                key,
                value: Some(b"v"),
                headers: &[],
            }],
        )
    };
    let e = write(None).expect_err("a compacted topic refuses a record without a key");
    assert!(
        !matches!(e.kind(), ErrorKind::Unauthorized | ErrorKind::Fenced),
        "{e}"
    );

    let e = write(Some(b"k")).expect_err("the sequence cannot be learned without READ");
    eprintln!("{e}");
    assert_eq!(e.kind(), ErrorKind::Unauthorized, "{e}");
    assert_names(&e, &Acl::topic(&topic, Op::Read));

    w.grant(&user, &[Acl::topic(&topic, Op::Read)]);
    write(Some(b"k")).expect("the write once READ is granted");
}

#[test]
fn a_guarded_write_refused_by_an_acl_leaves_no_transaction_open() {
    // The records are produced, then the group's offsets are refused (no READ on the group):
    // the write fails, and the transaction it opened is aborted before the call returns, not
    // left open until the next write or the coordinator's timeout (60 s here, so only the
    // client can have ended it).
    use kafka_coordination::core::leadership_status::TransactionState;
    use kafka_coordination::transport::{ConsumedOffset, GroupOffsets};
    let Some(w) = world() else { return };
    let role = unique("acl-refused-open");
    let group = unique("acl-refused-group");
    let user = w.user("acl-o");
    w.grant(
        &user,
        &[
            Acl::transactional_id(&role, Op::Write),
            Acl::topic(&w.data, Op::Write),
            Acl::topic(&w.data, Op::Read),
        ],
    );
    let t = KafkaTransport::new(w.config(&user)).expect("transport");
    let r = Role::new(role.clone()).expect("role");
    let token = t
        .acquire_epoch(&r, Duration::from_secs(60))
        .expect("acquire");
    let consumed = [ConsumedOffset {
        topic: &w.data,
        partition: 0,
        next_offset: 1,
        metadata: None,
    }];
    let commit = || {
        t.guarded_write_with_offsets(
            token,
            &[GuardedRecord {
                topic: &w.data,
                partition: 0,
                key: Some(b"k"),
                value: Some(b"v"),
                headers: &[],
            }],
            GroupOffsets {
                group: &group,
                offsets: &consumed,
            },
        )
    };
    let e = commit().expect_err("no READ on the group");
    assert_eq!(e.kind(), ErrorKind::Unauthorized, "{e}");
    let observer = transport_with(KafkaConfig::new(w.plaintext.clone(), PARTITIONS));
    let status = observer.describe_epoch(&r).expect("describe");
    assert!(
        matches!(
            status.state,
            Some(TransactionState::PrepareAbort | TransactionState::CompleteAbort)
        ),
        "the refused write's transaction is still {:?}: {status:?}",
        status.state
    );
    // The term goes on: the next write, once READ is granted, commits.
    w.grant(&user, &[Acl::group(&group, Op::Read)]);
    commit().expect("the commit once READ on the group is granted");
    t.release_role(&r);
}

#[test]
fn a_role_the_principal_may_not_describe_does_not_fail_the_lookups_it_shares() {
    let Some(w) = world() else { return };
    // One FindCoordinator names the coordinators of several roles (each role with a
    // candidacy on the client, and every role of a batched check); the broker answers each
    // key on its own, so a key this principal may not describe fails only its own role.
    let allowed = unique("acl-lookup-ok");
    let denied = unique("acl-lookup-denied");
    let user = w.user("acl-l");
    w.grant(&user, &[Acl::transactional_id(&allowed, Op::Describe)]);
    let t = KafkaTransport::new(w.config(&user)).expect("transport");
    let (allowed, denied) = (
        Role::new(allowed).expect("role"),
        Role::new(denied).expect("role"),
    );
    t.claim_role(&denied).expect("a candidacy");
    t.claim_role(&allowed).expect("a candidacy");
    let alone = t.describe_epochs(std::slice::from_ref(&allowed));
    assert!(alone[0].is_ok(), "{:?}", alone[0]);
    let both = t.describe_epochs(&[allowed.clone(), denied.clone()]);
    assert!(both[0].is_ok(), "{:?}", both[0]);
    let e = both[1].as_ref().expect_err("no ACL for the second role");
    assert_eq!(e.kind(), ErrorKind::Unauthorized, "{e}");
    assert_names(e, &Acl::transactional_id(denied.as_str(), Op::Describe));
    t.release_role(&allowed);
    t.release_role(&denied);
}
