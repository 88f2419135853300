//! docs/guide/deploying.md, checked: its Rust blocks are the functions of
//! `deploying_guide/page.rs` (compared as text) and each connects to the test broker's secured
//! listener; its TOML blocks, with the placeholders replaced by the test broker's addresses,
//! files and users, drive the command-line tool; its table of `KC_*` variables is the code's;
//! the tool authenticates with an OAUTHBEARER token file; two clients on two state topics with
//! one role name fence each other; and the default timing replaces a cut leader after
//! `lease + stagger × rank` (on a manual clock).
//!
//! The secured listeners come from `scripts/kafka/start.sh` (`KAFKA_SASL_SSL_BOOTSTRAP`,
//! `KAFKA_SSL_BOOTSTRAP`, `KAFKA_OAUTH_BOOTSTRAP`, `KAFKA_SSL_CA`, `KAFKA_SSL_CLIENT_CERT`,
//! `KAFKA_SSL_CLIENT_KEY`, `KAFKA_SCRAM_USER`, `KAFKA_SCRAM_PASSWORD`); without them each such
//! test says so loudly and returns.

use kafka_coordination_test_support as support;

use kafka_coordination_test_support::acls;
mod page;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, SystemTime};

use base64::engine::general_purpose::URL_SAFE_NO_PAD as BASE64URL;
use base64::Engine as _;
use kafka_coordination::blocking;
use kafka_coordination::describe::describe_leadership;
use kafka_coordination::kafka::{KafkaConfig, KafkaTransport};
use kafka_coordination::leadership::Leadership;
use kafka_coordination::testkit::TestCluster;
use kafka_coordination::{GuardedRecord, Options, SystemClock};
use support::{loud, transport_with, unique, PARTITIONS};

const KC: &str = env!("CARGO_BIN_EXE_kafka-coordination");
const PROMPT: Duration = Duration::from_secs(60);
/// The page's placeholders.
const BOOTSTRAP: &str = "kafka-0.example.com:9093,kafka-1.example.com:9093";
const CA: &str = "/etc/kafka/ca.pem";

fn manifest(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn read(path: &str) -> String {
    std::fs::read_to_string(manifest(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn page_text() -> String {
    read("../docs/guide/deploying.md")
}

/// The code blocks of `text` tagged `lang`, each without its fences.
fn blocks(text: &str, lang: &str) -> Vec<String> {
    let mut out = Vec::new();
    // Inside a block: whether it is tagged `lang`, and its text so far.
    let mut inside: Option<(bool, String)> = None;
    for line in text.lines() {
        let fence = line.trim_start().starts_with("```");
        match (&mut inside, fence) {
            (None, true) => {
                let tag = line.trim_start().trim_start_matches('`').trim();
                inside = Some((tag == lang, String::new()));
            }
            (None, false) => {}
            (Some((wanted, block)), true) => {
                if *wanted {
                    out.push(std::mem::take(block));
                }
                inside = None;
            }
            (Some((_, block)), false) => {
                block.push_str(line);
                block.push('\n');
            }
        }
    }
    out
}

/// `text` with each `(from, to)` replaced; every `from` must be there (a page that changed its
/// placeholders fails here instead of testing something else).
fn substitute(text: &str, pairs: &[(&str, &str)]) -> String {
    let mut out = text.to_owned();
    for (from, to) in pairs {
        assert!(out.contains(from), "the block has no {from:?}:\n{text}");
        out = out.replace(from, to);
    }
    out
}

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// The named variables, or `None` after saying loudly which one is missing.
fn vars<const N: usize>(test: &str, names: [&str; N]) -> Option<[String; N]> {
    let mut out = Vec::new();
    for name in names {
        match var(name) {
            Some(v) => out.push(v),
            None => {
                loud(&format!(
                    "{name} is not set, so {test} ran against nothing. Run: \
                     scripts/kafka/with-broker.sh cargo test -p kafka-coordination-cli -- \
                     deploying_guide::"
                ));
                return None;
            }
        }
    }
    out.try_into().ok()
}

fn scratch(name: &str, content: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(unique("kc-deploying"));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let path = dir.join(name);
    std::fs::write(&path, content).expect("scratch file");
    path
}

/// The tool with no `KC_*` variable of the test's environment.
fn kc() -> Command {
    let mut c = Command::new(KC);
    for (k, _) in std::env::vars() {
        if k.starts_with("KC_") {
            c.env_remove(k);
        }
    }
    c
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn assert_ok(what: &str, o: &Output) {
    assert!(
        o.status.success(),
        "{what}: {:?}\nstdout: {}\nstderr: {}",
        o.status,
        text(&o.stdout),
        text(&o.stderr)
    );
}

/// A state topic of the page's 16 partitions for this run, made on the PLAINTEXT listener
/// when it is there, else by `config`'s principal (a super user on the test broker).
fn state_topic(config: KafkaConfig) -> String {
    let topic = unique("deploying-state");
    assert_eq!(
        config.partitions(),
        PARTITIONS,
        "the page's examples use 16"
    );
    let config = match var("KAFKA_BOOTSTRAP") {
        Some(plain) => KafkaConfig::new(plain, PARTITIONS),
        None => config,
    };
    transport_with(config.with_topic(topic.clone()));
    topic
}

/// `config` connects: its transport checks the state topic and describes a role (the role's
/// transactional id at the coordinator).
fn connects(what: &str, config: KafkaConfig) {
    let t = KafkaTransport::new(config).unwrap_or_else(|e| panic!("{what}: {e}"));
    t.ensure_topic()
        .unwrap_or_else(|e| panic!("{what}: the topic check: {e}"));
    describe_leadership(&t, &unique("deploying-role"))
        .unwrap_or_else(|e| panic!("{what}: describe: {e}"));
}

/// The tool, with the TOML `file` and `env`, checks `topic` and lists its roles.
fn cli_connects(what: &str, file: &str, topic: &str, env: &[(&str, &Path)]) {
    let config = scratch("kc.toml", file);
    for args in [&["topic", "check"][..], &["roles"][..]] {
        let mut c = kc();
        c.arg("--config").arg(&config).args(["--topic", topic]);
        for (k, v) in env {
            c.env(k, v);
        }
        let o = c.args(args).output().expect("the tool runs");
        assert_ok(&format!("{what}: {args:?}"), &o);
    }
}

/// The page's three TOML blocks: SCRAM, mutual TLS, OAUTHBEARER.
fn toml_blocks() -> [String; 3] {
    let all = blocks(&page_text(), "toml");
    let find = |needle: &str| -> String {
        let found: Vec<&String> = all.iter().filter(|b| b.contains(needle)).collect();
        assert_eq!(found.len(), 1, "one TOML block with {needle}: {all:?}");
        found[0].clone()
    };
    let out = [
        find("\"SCRAM-SHA-512\""),
        find("protocol = \"SSL\""),
        find("\"OAUTHBEARER\""),
    ];
    assert_eq!(all.len(), 3, "the page's TOML blocks: {all:?}");
    for block in &out {
        toml::from_str::<toml::Table>(block).expect("valid TOML");
    }
    out
}

// ---- the page's text ------------------------------------------------------------------------

/// The module bodies of page.rs (dedented), in order.
fn page_rs_modules() -> Vec<String> {
    let source = read("tests/cli/deploying_guide/page.rs");
    let mut out = Vec::new();
    let mut body: Option<String> = None;
    for line in source.lines() {
        match &mut body {
            None if line.starts_with("pub mod ") => body = Some(String::new()),
            None => {}
            Some(b) if line == "}" => {
                out.push(std::mem::take(b));
                body = None;
            }
            Some(b) => {
                b.push_str(line.strip_prefix("    ").unwrap_or(line));
                b.push('\n');
            }
        }
    }
    out
}

#[test]
fn the_pages_rust_blocks_are_these_modules() {
    let page = blocks(&page_text(), "rust");
    let modules = page_rs_modules();
    assert_eq!(page.len(), 3, "the page's Rust blocks");
    assert_eq!(
        page, modules,
        "docs/guide/deploying.md's Rust blocks and the modules of \
         cli/tests/cli/deploying_guide/page.rs must be the same text"
    );
}

#[test]
fn every_kc_variable_of_the_code_is_on_the_page() {
    // What the tool reads: every `env = "KC_..."` of its flags.
    let mut code = Vec::new();
    for file in ["settings.rs", "supervisor.rs", "main.rs"] {
        let source = read(&format!("src/{file}"));
        for part in source.split("env = \"").skip(1) {
            if let Some(name) = part.split('"').next().filter(|n| n.starts_with("KC_")) {
                code.push(name.to_owned());
            }
        }
    }
    assert!(code.len() >= 16, "the flags' variables: {code:?}");
    // What `run` gives its child: the `("KC_...", ...)` pairs of supervisor.rs.
    let run = read("src/supervisor.rs");
    let mut child = Vec::new();
    for part in run.split("(\"KC_").skip(1) {
        if let Some(name) = part.split('"').next() {
            child.push(format!("KC_{name}"));
        }
    }
    assert!(child.contains(&"KC_TERM".to_owned()), "{child:?}");
    // The page's table: the first cell of each row that names a variable.
    let page = page_text();
    let listed: Vec<String> = page
        .lines()
        .filter_map(|l| l.strip_prefix("| `KC_"))
        .filter_map(|rest| rest.split('`').next())
        .map(|name| format!("KC_{name}"))
        .collect();
    for name in code.iter().chain(&child) {
        assert!(
            listed.contains(name),
            "{name} is read or set by the tool but not in the page's table"
        );
    }
    for name in &listed {
        assert!(
            code.contains(name) || child.contains(name),
            "{name} is in the page's table but the tool neither reads nor sets it"
        );
    }
}

// ---- SCRAM ----------------------------------------------------------------------------------

#[test]
fn scram_sha_512_from_the_page_connects() {
    let test = "scram_sha_512_from_the_page_connects";
    let Some([bootstrap, ca, user, password]) = vars(
        test,
        [
            "KAFKA_SASL_SSL_BOOTSTRAP",
            "KAFKA_SSL_CA",
            "KAFKA_SCRAM_USER",
            "KAFKA_SCRAM_PASSWORD",
        ],
    ) else {
        return;
    };
    let config = page::scram::scram_sha_512(&bootstrap, &ca, &user, &password);
    let topic = state_topic(config.clone());
    connects("the page's SCRAM code", config.with_topic(topic.clone()));

    let [scram, _, _] = toml_blocks();
    let file = substitute(
        &scram,
        &[
            (BOOTSTRAP, &bootstrap),
            (CA, &ca),
            (
                "sasl_username = \"billing\"",
                &format!("sasl_username = \"{user}\""),
            ),
        ],
    );
    let password_file = scratch("kafka-password", &format!("{password}\n"));
    cli_connects(
        "the page's SCRAM file",
        &file,
        &topic,
        &[("KC_SASL_PASSWORD_FILE", &password_file)],
    );
}

// ---- mutual TLS -----------------------------------------------------------------------------

#[test]
fn mutual_tls_from_the_page_connects() {
    let test = "mutual_tls_from_the_page_connects";
    let Some([bootstrap, ca, cert, key]) = vars(
        test,
        [
            "KAFKA_SSL_BOOTSTRAP",
            "KAFKA_SSL_CA",
            "KAFKA_SSL_CLIENT_CERT",
            "KAFKA_SSL_CLIENT_KEY",
        ],
    ) else {
        return;
    };
    let config = page::mtls::mutual_tls(&bootstrap, &ca, &cert, &key);
    let topic = state_topic(config.clone());
    connects(
        "the page's mutual-TLS code",
        config.with_topic(topic.clone()),
    );

    let [_, mtls, _] = toml_blocks();
    let file = substitute(
        &mtls,
        &[
            (BOOTSTRAP, &bootstrap),
            (CA, &ca),
            ("/etc/billing/client.pem", &cert),
            ("/etc/billing/client.key", &key),
        ],
    );
    cli_connects("the page's mutual-TLS file", &file, &topic, &[]);
}

// ---- OAUTHBEARER ----------------------------------------------------------------------------

/// An unsecured JWT (`alg` none, empty signature) for `sub` expiring at `exp`, what the test
/// broker's OAUTHBEARER listener (Kafka's unsecured validator) accepts; `exp: None` leaves the
/// claim out.
fn unsecured_jwt(sub: &str, exp: Option<SystemTime>) -> String {
    let secs = |t: SystemTime| {
        t.duration_since(SystemTime::UNIX_EPOCH)
            .expect("after 1970")
            .as_secs()
    };
    let now = secs(SystemTime::now());
    let claims = match exp {
        Some(exp) => format!(r#"{{"sub":"{sub}","iat":{now},"exp":{}}}"#, secs(exp)),
        None => format!(r#"{{"sub":"{sub}","iat":{now}}}"#),
    };
    format!(
        "{}.{}.",
        BASE64URL.encode(br#"{"alg":"none"}"#),
        BASE64URL.encode(claims)
    )
}

/// A token file for `principal` valid for ten minutes.
fn token_file(principal: &str) -> (PathBuf, String) {
    let jwt = unsecured_jwt(
        principal,
        Some(SystemTime::now() + Duration::from_secs(600)),
    );
    (scratch("token", &format!("{jwt}\n")), jwt)
}

#[test]
fn oauthbearer_from_the_page_connects() {
    let test = "oauthbearer_from_the_page_connects";
    let Some([bootstrap, ca, principal]) = vars(
        test,
        ["KAFKA_OAUTH_BOOTSTRAP", "KAFKA_SSL_CA", "KAFKA_SCRAM_USER"],
    ) else {
        return;
    };
    let (token, _) = token_file(&principal);
    let token = token.to_str().expect("a UTF-8 path").to_owned();
    // The test listener is SASL_PLAINTEXT: the last setting of a property wins, and the CA
    // goes unused without TLS.
    let config = page::oauth::oauthbearer(&bootstrap, &ca, &token)
        .with_property("security.protocol", "SASL_PLAINTEXT");
    let topic = state_topic(config.clone());
    connects(
        "the page's OAUTHBEARER code",
        config.with_topic(topic.clone()),
    );

    let [_, _, oauth] = toml_blocks();
    let file = substitute(
        &oauth,
        &[
            (BOOTSTRAP, &bootstrap),
            (CA, &ca),
            ("/var/run/secrets/kafka/token", &token),
            ("protocol = \"SASL_SSL\"", "protocol = \"SASL_PLAINTEXT\""),
        ],
    );
    cli_connects("the page's OAUTHBEARER file", &file, &topic, &[]);
}

/// The tool's own flags for OAUTHBEARER: a token file authenticates; a file without `exp` (or
/// missing, or empty) is a configuration error naming the file, and the token is never printed.
#[test]
fn the_cli_authenticates_with_a_token_file() {
    let test = "the_cli_authenticates_with_a_token_file";
    let Some([bootstrap, principal]) = vars(test, ["KAFKA_OAUTH_BOOTSTRAP", "KAFKA_SCRAM_USER"])
    else {
        return;
    };
    let (token, jwt) = token_file(&principal);
    let topic = state_topic(KafkaConfig::new(bootstrap.clone(), PARTITIONS));
    let tool = |token: &Path, args: &[&str]| {
        kc().args(["-b", &bootstrap, "--topic", &topic])
            .args(["--security-protocol", "SASL_PLAINTEXT"])
            .args(["--sasl-mechanism", "OAUTHBEARER"])
            .env("KC_SASL_OAUTHBEARER_TOKEN_FILE", token)
            .args(args)
            .output()
            .expect("the tool runs")
    };
    for args in [
        &["topic", "check"][..],
        &["describe", "deploying-oauth-role"][..],
    ] {
        let o = tool(&token, args);
        assert_ok(&format!("{args:?} with a token file"), &o);
        let all = text(&o.stdout) + &text(&o.stderr);
        assert!(!all.contains(&jwt), "the token is printed: {all}");
    }

    let no_exp = unsecured_jwt(&principal, None);
    let no_exp_file = scratch("token-without-exp", &no_exp);
    let missing = std::env::temp_dir().join(unique("kc-no-such-token"));
    let empty = scratch("empty-token", "");
    for (file, says) in [
        (&no_exp_file, "without an exp claim"),
        (&missing, "cannot read the OAUTHBEARER token file"),
        (&empty, "is empty"),
    ] {
        let o = tool(file, &["topic", "check"]);
        let stderr = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{file:?}: {stderr}");
        assert!(
            stderr.contains(&file.display().to_string()) && stderr.contains(says),
            "{stderr}"
        );
        assert!(!stderr.contains(&no_exp), "the token is printed: {stderr}");
    }
}

// ---- role names -----------------------------------------------------------------------------

fn elect(t: KafkaTransport, role: &str, member: &str) -> Leadership {
    let options = Options::new()
        .lease_duration(Duration::from_secs(4))
        .renew_interval(Duration::from_millis(1000))
        .challenge_stagger(Duration::from_millis(300))
        .clock(SystemClock);
    let candidacy = blocking::start(t, role, member, options).expect("a candidacy");
    match candidacy.elected_blocking_timeout(PROMPT) {
        Ok(outcome) => outcome.unwrap_or_else(|e| panic!("{member}: {e}")),
        Err(c) => panic!("{member} was not elected in {PROMPT:?}: {:?}", c.snapshot()),
    }
}

/// The state topic is no namespace: two clients on two state topics that campaign for one
/// role name share its transactional id, so the second one's election fences the first one's
/// guarded writes.
#[test]
fn two_deployments_with_one_role_name_fence_each_other() {
    let Some(bootstrap) = support::bootstrap(
        "deploying guide's role-name test",
        "scripts/kafka/with-broker.sh cargo test -p kafka-coordination-cli -- deploying_guide::",
    ) else {
        return;
    };
    let role = unique("scheduler");
    let data = unique("deploying-data");
    transport_with(KafkaConfig::new(bootstrap.clone(), 1).with_topic(data.clone()));
    let on = |topic: &str| {
        transport_with(KafkaConfig::new(bootstrap.clone(), PARTITIONS).with_topic(topic))
    };
    let (staging, production) = (unique("staging-state"), unique("production-state"));
    let first = elect(on(&staging), &role, "staging-node");
    let record = GuardedRecord {
        topic: &data,
        partition: 0,
        key: Some(b"k"),
        value: Some(b"v"),
        headers: &[],
    };
    first
        .guarded_write_blocking(&[record])
        .expect("the first deployment writes while it is alone");
    let second = elect(on(&production), &role, "production-node");
    let e = first
        .guarded_write_blocking(&[record])
        .expect_err("the other deployment's election fences this one");
    assert!(e.is_fenced(), "{e:?}");
    assert!(second.token() != first.token());
    second
        .guarded_write_blocking(&[record])
        .expect("the second deployment writes");
    let _ = second.resign_blocking();
}

// ---- the timing -----------------------------------------------------------------------------

/// The role's lease deadline, in ms.
fn deadline(cluster: &TestCluster, role: &str) -> i64 {
    cluster
        .role_state(role)
        .lease()
        .map(|e| e.lease.deadline.0)
        .expect("a lease")
}

/// With the default timing (lease 30 s, renew 10 s, stagger 5 s), a leader cut off right after
/// a renewal is replaced at its lease's deadline by the first standby, or, with that one cut
/// off too, one stagger later by the second: `R + lease + rank × stagger`.
#[test]
fn the_default_timing_replaces_a_cut_leader_after_lease_plus_stagger_times_rank() {
    let defaults = Options::new();
    let (lease, renew, stagger) = (
        defaults.timing_value().lease_duration,
        defaults.timing_value().renew_interval,
        defaults.timing_value().challenge_stagger,
    );
    assert_eq!(
        (lease, renew, stagger),
        (
            Duration::from_secs(30),
            Duration::from_secs(10),
            Duration::from_secs(5)
        ),
        "the page's defaults"
    );
    let ms = |d: Duration| i64::try_from(d.as_millis()).expect("ms");
    for rank in [0u32, 1] {
        let cluster = TestCluster::new().options_with(|_| Options::new());
        let role = "billing";
        let leader = cluster.join(role, "node-a");
        let first = cluster.join(role, "node-b");
        let second = cluster.join(role, "node-c");
        assert!(leader.is_leader());
        assert_eq!((first.rank(), second.rank()), (Some(0), Some(1)));
        // Wait for a renewal, then cut the leader (and the first standby) at once.
        let before = deadline(&cluster, role);
        assert!(cluster.advance_until(renew * 2, || deadline(&cluster, role) != before));
        let renewed = deadline(&cluster, role);
        let cut_at = cluster.now().0;
        assert!(renewed - cut_at <= ms(lease), "the renewal's deadline");
        leader.link().cut();
        let successor = if rank == 0 {
            &first
        } else {
            first.link().cut();
            &second
        };
        assert!(
            cluster.advance_until(lease * 3, || successor.is_leader()),
            "rank {rank} took over"
        );
        let elected = cluster.now().0;
        let expected = renewed + ms(stagger) * i64::from(rank);
        // The clock moves in 100 ms steps, and the standby reads, checks and acquires.
        assert!(
            elected >= expected && elected <= expected + 200,
            "rank {rank}: elected {} ms after the deadline of the leader's last lease \
             (expected {} ms)",
            elected - renewed,
            ms(stagger) * i64::from(rank)
        );
        assert!(
            elected - cut_at <= ms(lease + stagger * rank) + 200,
            "rank {rank}: replaced {} ms after the cut",
            elected - cut_at
        );
    }
}

// ---- the tool's ACLs ------------------------------------------------------------------------

/// The page's table of the tool's ACLs, on the SASL_SSL listener whose authorizer enforces
/// them: with Describe and DescribeConfigs on the state topic `topic check` works; with Read
/// and DescribeConfigs, `topic check`, `roles` and `watch`; with Describe on the role's
/// transactional id too, `describe`, while `deregister` is refused as unauthorized (exit 2);
/// with Read, Write and DescribeConfigs on the state topic, `deregister` removes a ghost.
#[test]
fn the_cli_needs_the_documented_acls_per_subcommand() {
    let test = "the_cli_needs_the_documented_acls_per_subcommand";
    let Some([plaintext, sasl_ssl, ca]) = vars(
        test,
        [
            "KAFKA_BOOTSTRAP",
            "KAFKA_SASL_SSL_BOOTSTRAP",
            "KAFKA_SSL_CA",
        ],
    ) else {
        return;
    };
    use acls::{Acl, Admin, Op};
    use kafka_coordination::core::record::{Key, MemberId, Registration, Role};
    use kafka_coordination::core::UnixMillis;
    use kafka_coordination::transport::Wait;

    let topic = state_topic(KafkaConfig::new(plaintext.clone(), PARTITIONS));
    let role = unique("prod-eu.billing.scheduler");
    // A leader, and a ghost registered behind it, written by the PLAINTEXT super user.
    let writer = transport_with(KafkaConfig::new(plaintext.clone(), PARTITIONS).with_topic(&topic));
    let r = Role::new(role.as_str()).expect("role");
    let ghost = MemberId::new("ghost").expect("member");
    let partition = writer.role_partition(&r).expect("partition");
    let leader = elect(
        transport_with(KafkaConfig::new(plaintext.clone(), PARTITIONS).with_topic(&topic)),
        &role,
        "node-a",
    );
    writer
        .append(
            partition,
            &Key::registration(r, ghost.clone()).encode(),
            Some(
                &Registration {
                    member: ghost,
                    registered_at: UnixMillis(0),
                }
                .encode(),
            ),
        )
        .expect("the ghost's registration");

    let mut admin = Admin::connect(&plaintext);
    let user = |admin: &mut Admin, prefix: &str, acls: &[Acl]| {
        let user = unique(prefix);
        let password = format!("{user}-secret");
        admin.create_user(&user, &password);
        admin.grant(&user, acls);
        (user, password)
    };
    let tool = |(user, password): &(String, String), args: &[&str]| {
        kc().args(["-b", &sasl_ssl, "--topic", &topic])
            .args(["--security-protocol", "SASL_SSL"])
            .args(["--sasl-mechanism", "SCRAM-SHA-512"])
            .args(["--sasl-username", user, "--ssl-ca-location", &ca])
            .env("KC_SASL_PASSWORD", password)
            .args(args)
            .output()
            .expect("the tool runs")
    };

    let checker = user(
        &mut admin,
        "kc-checker",
        &[
            Acl::topic(&topic, Op::Describe),
            Acl::topic(&topic, Op::DescribeConfigs),
        ],
    );
    assert_ok(
        "topic check as a checker",
        &tool(&checker, &["topic", "check"]),
    );

    let reader_rows = [
        Acl::topic(&topic, Op::Read),
        Acl::topic(&topic, Op::DescribeConfigs),
    ];
    let reader = user(&mut admin, "kc-reader", &reader_rows);
    for args in [
        &["topic", "check"][..],
        &["roles"][..],
        &["watch", &role, "--count", "1"][..],
    ] {
        let o = tool(&reader, args);
        assert_ok(&format!("{args:?} as a reader"), &o);
        if args[0] != "topic" {
            assert!(text(&o.stdout).contains("node-a"), "{}", text(&o.stdout));
        }
    }
    let mut observer_rows = reader_rows.to_vec();
    observer_rows.push(Acl::transactional_id(&role, Op::Describe));
    let observer = user(&mut admin, "kc-observer", &observer_rows);
    let o = tool(&observer, &["describe", &role]);
    assert_ok("describe as an observer", &o);
    assert!(text(&o.stdout).contains("node-a"), "{}", text(&o.stdout));
    let o = tool(&observer, &["deregister", &role, "ghost"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains(&format!("Topic '{topic}'")),
        "{}",
        text(&o.stderr)
    );

    let mut operator_rows = reader_rows.to_vec();
    operator_rows.push(Acl::topic(&topic, Op::Write));
    let operator = user(&mut admin, "kc-operator", &operator_rows);
    assert_ok(
        "deregister with Write on the state topic",
        &tool(&operator, &["deregister", &role, "ghost"]),
    );
    let _ = leader.resign_blocking();
}

/// The page's row for offsets in a guarded write: with a member's rows, Write and Read on the
/// topics, but no ACL on the consumer group, committing the group's offsets in a guarded write
/// is refused as unauthorized naming the group; Read on the group makes it work.
#[test]
fn offsets_in_a_guarded_write_need_read_on_the_group() {
    let test = "offsets_in_a_guarded_write_need_read_on_the_group";
    let Some([plaintext, sasl_ssl, ca]) = vars(
        test,
        [
            "KAFKA_BOOTSTRAP",
            "KAFKA_SASL_SSL_BOOTSTRAP",
            "KAFKA_SSL_CA",
        ],
    ) else {
        return;
    };
    use acls::{Acl, Admin, Op};
    use kafka_coordination::error::ErrorKind;
    use kafka_coordination::kafka::{ConsumedOffset, GroupOffsets};

    let topic = state_topic(KafkaConfig::new(plaintext.clone(), PARTITIONS));
    let data = unique("deploying-input");
    transport_with(KafkaConfig::new(plaintext.clone(), 1).with_topic(data.clone()));
    let role = unique("prod-eu.billing.consumer");
    let group = unique("prod-eu.billing.consumer-group");
    let user = unique("kc-consumer");
    let password = format!("{user}-secret");
    let mut admin = Admin::connect(&plaintext);
    admin.create_user(&user, &password);
    admin.grant(
        &user,
        &[
            Acl::topic(&topic, Op::Read),
            Acl::topic(&topic, Op::Write),
            Acl::topic(&topic, Op::DescribeConfigs),
            Acl::transactional_id(&role, Op::Write),
            Acl::topic(&data, Op::Write),
            Acl::topic(&data, Op::Read),
        ],
    );
    let config = page::scram::scram_sha_512(&sasl_ssl, &ca, &user, &password).with_topic(&topic);
    let t = KafkaTransport::new(config).expect("transport");
    t.ensure_topic().expect("the topic check");
    let leader = elect(t, &role, "node-a");
    let record = GuardedRecord {
        topic: &data,
        partition: 0,
        key: Some(b"k"),
        value: Some(b"result"),
        headers: &[],
    };
    let consumed = [ConsumedOffset {
        topic: &data,
        partition: 0,
        next_offset: 1,
        metadata: None,
    }];
    let commit = || {
        leader.guarded_write_with_offsets_blocking(
            &[record],
            GroupOffsets {
                group: &group,
                offsets: &consumed,
            },
        )
    };
    match commit() {
        Err(kafka_coordination::Error::Transport(e)) if e.kind() == ErrorKind::Unauthorized => {
            assert!(e.message().contains(&format!("Group '{group}'")), "{e}");
        }
        other => panic!("expected an authorization error naming the group, got {other:?}"),
    }
    admin.grant(&user, &[Acl::group(&group, Op::Read)]);
    commit().expect("the commit once Read on the group is granted");
    let _ = leader.resign_blocking();
}
