//! SASL OAUTHBEARER (RFC 7628, KIP-255): the tokens come from a [`TokenProvider`] the
//! application supplies
//! ([`KafkaConfig::with_token_provider`](crate::KafkaConfig::with_token_provider)); this
//! client fetches no token itself.
//!
//! One token serves every connection built from a configuration and its clones. It is used
//! until 80% of its lifetime has passed (librdkafka's and the Java client's rule), then the
//! next connection that authenticates asks the provider for a fresh one; a provider that fails
//! is asked again after a backoff (1 s, doubling, at most 30 s) while the current token stays
//! in use until it expires. A connection that needs a token when none is valid fails with the provider's error
//! (retriable). The token is never shown: not by `Debug`, not in errors.

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use kafka_coordination_transport::lock::lock;

/// The application's source of OAuth bearer tokens for `sasl.mechanism=OAUTHBEARER`.
///
/// Called on the client's connection threads when a connection authenticates (or
/// re-authenticates, KIP-368) and the cached token is past 80% of its lifetime: it should
/// return promptly (a provider that talks to an identity provider can fetch ahead in the
/// background and hand out the latest token here). An `Err` is retried with a backoff; its
/// text reaches the error of the connection that needed the token, so it must not hold
/// secrets. Closures `Fn() -> Result<OAuthToken, String>` are providers.
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use kafka_coordination_kafka::{KafkaConfig, OAuthToken};
///
/// // A provider that reads a token that a sidecar keeps fresh in a file.
/// let provider = || -> Result<OAuthToken, String> {
///     let jwt = std::fs::read_to_string("/var/run/secrets/kafka/token")
///         .map_err(|e| format!("reading the token file: {e}"))?;
///     // The expiry would come from the token's `exp` claim or the identity provider's
///     // `expires_in`.
///     let expires_at = SystemTime::now() + Duration::from_secs(300);
///     Ok(OAuthToken::new(jwt.trim(), expires_at).with_principal("svc-leader"))
/// };
/// let config = KafkaConfig::new("broker:9093", 16)
///     .with_property("security.protocol", "SASL_SSL")
///     .with_property("sasl.mechanism", "OAUTHBEARER")
///     .with_token_provider(provider);
/// assert!(format!("{config:?}").contains("TokenProvider"));
/// ```
pub trait TokenProvider: Send + Sync {
    /// A token and when it expires.
    fn token(&self) -> Result<OAuthToken, String>;
}

impl<F> TokenProvider for F
where
    F: Fn() -> Result<OAuthToken, String> + Send + Sync,
{
    fn token(&self) -> Result<OAuthToken, String> {
        self()
    }
}

/// An OAuth bearer token (a JWT, as a rule), its expiry, and the SASL extensions to send with
/// it. `Debug` shows the expiry, the principal and the extensions' keys, never the token or
/// the extensions' values.
#[derive(Clone, PartialEq, Eq)]
pub struct OAuthToken {
    value: String,
    expires_at: SystemTime,
    principal: Option<String>,
    extensions: Vec<(String, String)>,
}

impl OAuthToken {
    /// The token `value` (RFC 6750's b64token: letters, digits, `-._~+/`, then `=` padding;
    /// a JWT is one), valid until `expires_at`.
    pub fn new(value: impl Into<String>, expires_at: SystemTime) -> Self {
        OAuthToken {
            value: value.into(),
            expires_at,
            principal: None,
            extensions: Vec::new(),
        }
    }

    /// Who the token names (its subject), for error messages only: the broker takes the
    /// principal from the token itself.
    pub fn with_principal(mut self, principal: impl Into<String>) -> Self {
        self.principal = Some(principal.into());
        self
    }

    /// A SASL extension (RFC 7628 section 3.1, KIP-342) sent with the token, for example the
    /// `logicalCluster` or `identityPoolId` that some managed services ask for. Keys are
    /// letters only (`auth` is reserved); values are printable ASCII, spaces and tabs.
    pub fn with_extension(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.extensions.push((key.into(), value.into()));
        self
    }

    /// When the token expires.
    pub fn expires_at(&self) -> SystemTime {
        self.expires_at
    }

    /// See [`with_principal`](Self::with_principal).
    pub fn principal(&self) -> Option<&str> {
        self.principal.as_deref()
    }

    /// What the token's holder is called in messages.
    pub(crate) fn who(&self) -> String {
        match &self.principal {
            Some(p) => format!("a token for principal '{p}'"),
            None => "a token".to_owned(),
        }
    }

    /// `text` (a broker's message) with the token taken out, should the broker echo it.
    pub(crate) fn redact(&self, text: String) -> String {
        if self.value.len() < 8 {
            return text;
        }
        text.replace(&self.value, "<token>")
    }

    /// Why the token cannot be sent, if it cannot (never shows the token or a value).
    fn check(&self) -> Result<(), String> {
        let v = self.value.as_bytes();
        let body = v.iter().rposition(|&c| c != b'=').map_or(0, |i| i + 1);
        let b64token = |c: &u8| c.is_ascii_alphanumeric() || b"-._~+/".contains(c);
        if body == 0 || !v[..body].iter().all(b64token) {
            return Err(format!(
                "the token provider returned a token of {} bytes that is not an RFC 6750 \
                 bearer token (letters, digits and -._~+/ only, then = padding)",
                v.len()
            ));
        }
        for (key, value) in &self.extensions {
            if key.is_empty() || !key.bytes().all(|c| c.is_ascii_alphabetic()) || key == "auth" {
                return Err(format!(
                    "the token provider returned a SASL extension named '{}': names are \
                     letters only, and not 'auth'",
                    key.escape_default()
                ));
            }
            let printable = |c: u8| (0x21..=0x7e).contains(&c) || b" \t\r\n".contains(&c);
            if value.is_empty() || !value.bytes().all(printable) {
                return Err(format!(
                    "the token provider returned SASL extension '{key}' with a value that is \
                     empty or not printable ASCII"
                ));
            }
        }
        Ok(())
    }

    /// The client's initial response (RFC 7628 section 3.1): the GS2 header `n,,` (no
    /// authorization id: the broker takes the principal from the token), then
    /// `\x01auth=Bearer <token>`, each extension as `\x01key=value`, and `\x01\x01`.
    pub(crate) fn initial_response(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.value.len() + 32);
        out.extend_from_slice(b"n,,\x01auth=Bearer ");
        out.extend_from_slice(self.value.as_bytes());
        for (key, value) in &self.extensions {
            out.push(1);
            out.extend_from_slice(key.as_bytes());
            out.push(b'=');
            out.extend_from_slice(value.as_bytes());
        }
        out.extend_from_slice(b"\x01\x01");
        out
    }
}

impl fmt::Debug for OAuthToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keys: Vec<&str> = self.extensions.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("OAuthToken")
            .field("value", &"<redacted>")
            .field("expires_at", &self.expires_at)
            .field("principal", &self.principal)
            .field("extensions", &keys)
            .finish()
    }
}

/// A [`TokenProvider`] that reads a JWT from a file each time the client asks for a token (when
/// a connection authenticates and the cached token is past 80% of its lifetime): a sidecar or
/// an agent keeps the file fresh, this provider never caches on its own. The expiry is the
/// token's `exp` claim, the principal shown in errors its `sub` claim; the signature is not
/// checked (the broker does that). Errors name the file and what is wrong with it, never its
/// content.
///
/// The command-line tool's `--sasl-oauthbearer-token-file` and the configuration file's
/// `sasl_oauthbearer_token_file` ([`SecuritySettings`](crate::SecuritySettings)) use it.
///
/// ```
/// use kafka_coordination_kafka::{KafkaConfig, TokenFile};
///
/// let config = KafkaConfig::new("broker:9093", 16)
///     .with_property("security.protocol", "SASL_SSL")
///     .with_property("sasl.mechanism", "OAUTHBEARER")
///     .with_token_provider(TokenFile::new("/var/run/secrets/kafka/token"));
/// # let _ = config;
/// let e = TokenFile::new("/nonexistent/token").read().unwrap_err();
/// assert!(e.contains("/nonexistent/token"), "{e}");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenFile {
    path: std::path::PathBuf,
}

impl TokenFile {
    /// A provider that reads the file at `path`.
    pub fn new(path: impl Into<std::path::PathBuf>) -> Self {
        TokenFile { path: path.into() }
    }

    /// The file's path.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// Reads the file and parses its token: the error says why the file cannot serve (it
    /// cannot be read, it is empty, it holds no JWT, the JWT has no `exp` claim), naming the
    /// file.
    pub fn read(&self) -> Result<OAuthToken, String> {
        let text = std::fs::read_to_string(&self.path).map_err(|e| {
            format!(
                "cannot read the OAUTHBEARER token file {}: {e}",
                self.path.display()
            )
        })?;
        parse_jwt(text.trim())
            .map_err(|why| format!("the OAUTHBEARER token file {} {why}", self.path.display()))
    }
}

impl TokenProvider for TokenFile {
    fn token(&self) -> Result<OAuthToken, String> {
        self.read()
    }
}

/// The token of a JWT's compact form (`header.claims.signature`, base64url): its expiry from
/// `exp` (seconds since 1970), its principal from `sub`. `Err` completes "the file ...": it
/// never holds the token.
fn parse_jwt(jwt: &str) -> Result<OAuthToken, String> {
    use base64::Engine as _;
    if jwt.is_empty() {
        return Err("is empty (it should hold a JWT)".to_owned());
    }
    let not_a_jwt = || {
        format!(
            "does not hold a JWT ({} bytes; a JWT is three base64url parts separated by dots, \
             the second a JSON object of claims)",
            jwt.len()
        )
    };
    let parts: Vec<&str> = jwt.split('.').collect();
    let [header, claims, _signature] = parts.as_slice() else {
        return Err(not_a_jwt());
    };
    let decode = |part: &str| {
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(part.trim_end_matches('='))
            .ok()
            .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
            .filter(serde_json::Value::is_object)
    };
    let (Some(_), Some(claims)) = (decode(header), decode(claims)) else {
        return Err(not_a_jwt());
    };
    let Some(exp) = claims.get("exp") else {
        return Err(
            "holds a JWT without an exp claim (its expiry, in seconds since 1970): the client \
             needs it to know when to read the file again"
                .to_owned(),
        );
    };
    let expires_at = exp
        .as_f64()
        .filter(|s| s.is_finite() && *s > 0.0 && *s < 1e11)
        .map(|s| SystemTime::UNIX_EPOCH + Duration::from_secs_f64(s))
        .ok_or_else(|| {
            "holds a JWT whose exp claim is not a time (seconds since 1970)".to_owned()
        })?;
    let token = OAuthToken::new(jwt, expires_at);
    Ok(
        match claims.get("sub").and_then(serde_json::Value::as_str) {
            Some(sub) => token.with_principal(sub),
            None => token,
        },
    )
}

/// A [`TokenProvider`] held by a [`KafkaConfig`](crate::KafkaConfig), with its token:
/// every client built from the configuration (or a clone of it) shares one token. Shown as
/// `TokenProvider(..)`.
#[derive(Clone)]
pub(crate) struct ProviderRef(Arc<TokenCache>);

impl fmt::Debug for ProviderRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TokenProvider(..)")
    }
}

impl ProviderRef {
    /// Holds `provider`, with no token fetched yet.
    pub(crate) fn new(provider: impl TokenProvider + 'static) -> ProviderRef {
        ProviderRef(Arc::new(TokenCache::new(Arc::new(provider))))
    }

    /// The provider's token cache.
    pub(crate) fn cache(&self) -> &Arc<TokenCache> {
        &self.0
    }
}

/// The fraction of a token's lifetime after which it is refreshed (librdkafka, Java: 80%).
const REFRESH_AT: f64 = 0.8;
/// The first pause after a failed refresh; it doubles with each failure, up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// The current token of one client, refreshed from its provider (see the module docs). Time
/// enters as `now`, so the schedule is testable.
pub(crate) struct TokenCache {
    provider: Arc<dyn TokenProvider>,
    state: Mutex<CacheState>,
}

#[derive(Default)]
struct CacheState {
    token: Option<Held>,
    /// Failed refreshes in a row, the last one's error, and when to ask again.
    failures: u32,
    last_error: Option<String>,
    retry_at: Option<SystemTime>,
    /// Tokens the provider handed out (tests count refreshes).
    fetched: u64,
}

struct Held {
    token: OAuthToken,
    refresh_at: SystemTime,
}

impl fmt::Debug for TokenCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = lock(&self.state);
        f.debug_struct("TokenCache")
            .field("token", &state.token.as_ref().map(|h| &h.token))
            .field("failures", &state.failures)
            .finish_non_exhaustive()
    }
}

impl TokenCache {
    pub(crate) fn new(provider: Arc<dyn TokenProvider>) -> TokenCache {
        TokenCache {
            provider,
            state: Mutex::new(CacheState::default()),
        }
    }

    /// The token to authenticate with at `now`: the cached one until its refresh time, else a
    /// fresh one from the provider (the cached one while it is valid and the provider fails).
    /// `Err` says why no valid token is at hand; it never holds a token.
    pub(crate) fn token(&self, now: SystemTime) -> Result<OAuthToken, String> {
        let mut state = lock(&self.state);
        if let Some(held) = &state.token {
            if now < held.refresh_at {
                return Ok(held.token.clone());
            }
        }
        let valid = state
            .token
            .as_ref()
            .filter(|h| now < h.token.expires_at)
            .map(|h| h.token.clone());
        if let Some(retry_at) = state.retry_at {
            if now < retry_at {
                return valid.ok_or_else(|| waiting(&state, retry_at, now));
            }
        }
        let fetched = self.provider.token().and_then(|t| {
            t.check()?;
            if t.expires_at <= now {
                return Err(format!(
                    "the token provider returned {} that expired already ({:?} ago)",
                    t.who(),
                    now.duration_since(t.expires_at)
                        .map(|d| Duration::from_millis(d.as_millis() as u64))
                        .unwrap_or_default()
                ));
            }
            Ok(t)
        });
        match fetched {
            Ok(token) => {
                let lifetime = token.expires_at.duration_since(now).unwrap_or_default();
                state.token = Some(Held {
                    refresh_at: now + lifetime.mul_f64(REFRESH_AT),
                    token: token.clone(),
                });
                state.failures = 0;
                state.last_error = None;
                state.retry_at = None;
                state.fetched += 1;
                Ok(token)
            }
            Err(why) => {
                state.failures = state.failures.saturating_add(1);
                let exponent = state.failures.saturating_sub(1).min(8);
                let backoff = (FIRST_BACKOFF * 2u32.pow(exponent)).min(MAX_BACKOFF);
                state.retry_at = Some(now + backoff);
                state.last_error = Some(why.clone());
                match valid {
                    Some(token) => Ok(token),
                    None => Err(format!(
                        "{why} (failure {} in a row; the provider is asked again in {backoff:?})",
                        state.failures
                    )),
                }
            }
        }
    }

    /// How many tokens the provider has handed out.
    #[cfg(test)]
    pub(crate) fn fetched(&self) -> u64 {
        lock(&self.state).fetched
    }
}

/// The error of a connection that needs a token while the provider is in its backoff.
fn waiting(state: &CacheState, retry_at: SystemTime, now: SystemTime) -> String {
    format!(
        "{} (failure {} in a row; the provider is asked again in {:?})",
        state
            .last_error
            .as_deref()
            .unwrap_or("the token provider failed"),
        state.failures,
        retry_at.duration_since(now).unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    const SECRET: &str = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhZG1pbiJ9.";

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000 + secs)
    }

    #[test]
    fn the_initial_response_follows_rfc_7628() {
        let token = OAuthToken::new("abc.def.", at(100));
        assert_eq!(
            token.initial_response(),
            b"n,,\x01auth=Bearer abc.def.\x01\x01".to_vec()
        );
        let token = token
            .with_extension("logicalCluster", "lkc-1")
            .with_extension("traceId", "a b");
        assert_eq!(
            token.initial_response(),
            b"n,,\x01auth=Bearer abc.def.\x01logicalCluster=lkc-1\x01traceId=a b\x01\x01".to_vec()
        );
    }

    #[test]
    fn tokens_and_extensions_are_checked_without_being_shown() {
        assert_eq!(OAuthToken::new(SECRET, at(1)).check(), Ok(()));
        assert_eq!(OAuthToken::new("YWJj==", at(1)).check(), Ok(()));
        for bad in ["", "==", "has space", "new\nline", "a\x01b", "ä"] {
            let e = OAuthToken::new(bad, at(1)).check().expect_err(bad);
            assert!(e.contains("RFC 6750"), "{e}");
            if !bad.is_empty() {
                assert!(!e.contains(bad), "{e}");
            }
        }
        let with = |k: &str, v: &str| OAuthToken::new(SECRET, at(1)).with_extension(k, v).check();
        assert!(with("auth", "x").expect_err("reserved").contains("'auth'"));
        assert!(with("a1", "x").is_err());
        assert!(with("", "x").is_err());
        let e = with("ok", "hidden\x01value").expect_err("separator");
        assert!(e.contains("'ok'") && !e.contains("hidden"), "{e}");
        assert_eq!(with("ok", "any printable = , ;"), Ok(()));
    }

    #[test]
    fn debug_never_shows_the_token_or_extension_values() {
        let token = OAuthToken::new(SECRET, at(5))
            .with_principal("svc")
            .with_extension("poolId", "pool-secret-value");
        let shown = format!("{token:?}");
        assert!(!shown.contains(SECRET) && !shown.contains("eyJ"), "{shown}");
        assert!(!shown.contains("pool-secret-value"), "{shown}");
        assert!(shown.contains("svc") && shown.contains("poolId"), "{shown}");

        let cache = ProviderRef::new(move || Ok(OAuthToken::new(SECRET, at(5))));
        assert_eq!(format!("{cache:?}"), "TokenProvider(..)");
        let cache = cache.cache();
        cache.token(at(0)).expect("token");
        let shown = format!("{cache:?}");
        assert!(
            !shown.contains("eyJ") && shown.contains("<redacted>"),
            "{shown}"
        );
    }

    /// A provider whose tokens live 100 s from its clock, and that fails while told to.
    struct Fake {
        now: Mutex<SystemTime>,
        calls: AtomicU32,
        fail: std::sync::atomic::AtomicBool,
    }

    impl TokenProvider for Fake {
        fn token(&self) -> Result<OAuthToken, String> {
            let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
            if self.fail.load(Ordering::SeqCst) {
                return Err("the identity provider is down".to_owned());
            }
            Ok(OAuthToken::new(
                format!("token{n}"),
                *lock(&self.now) + Duration::from_secs(100),
            ))
        }
    }

    fn fake() -> (Arc<Fake>, TokenCache) {
        let fake = Arc::new(Fake {
            now: Mutex::new(at(0)),
            calls: AtomicU32::new(0),
            fail: false.into(),
        });
        let cache = TokenCache::new(Arc::clone(&fake) as Arc<dyn TokenProvider>);
        (fake, cache)
    }

    fn value(t: Result<OAuthToken, String>) -> String {
        t.expect("a token").value
    }

    #[test]
    fn a_token_is_refreshed_at_80_percent_of_its_lifetime() {
        let (fake, cache) = fake();
        assert_eq!(value(cache.token(at(0))), "token1");
        assert_eq!(value(cache.token(at(79))), "token1", "cached");
        assert_eq!(fake.calls.load(Ordering::SeqCst), 1);
        *lock(&fake.now) = at(80);
        assert_eq!(value(cache.token(at(80))), "token2", "refreshed at 80 s");
        // The new token lives until 180 s: refreshed again at 80 + 80 s.
        assert_eq!(value(cache.token(at(159))), "token2");
        *lock(&fake.now) = at(160);
        assert_eq!(value(cache.token(at(160))), "token3");
        assert_eq!(cache.fetched(), 3);
    }

    #[test]
    fn a_failing_provider_is_retried_with_backoff_and_the_valid_token_stays_in_use() {
        let (fake, cache) = fake();
        assert_eq!(value(cache.token(at(0))), "token1");
        fake.fail.store(true, Ordering::SeqCst);
        // Past the refresh time: the provider fails, the token (valid until 100 s) is used.
        assert_eq!(value(cache.token(at(80))), "token1");
        assert_eq!(fake.calls.load(Ordering::SeqCst), 2);
        // Within the 1 s backoff the provider is not asked.
        assert_eq!(value(cache.token(at(80))), "token1");
        assert_eq!(fake.calls.load(Ordering::SeqCst), 2);
        assert_eq!(value(cache.token(at(81))), "token1");
        assert_eq!(
            fake.calls.load(Ordering::SeqCst),
            3,
            "asked again after 1 s"
        );
        // Then after 2 s, 4 s, ...
        assert_eq!(value(cache.token(at(82))), "token1");
        assert_eq!(fake.calls.load(Ordering::SeqCst), 3);
        assert_eq!(value(cache.token(at(83))), "token1");
        assert_eq!(fake.calls.load(Ordering::SeqCst), 4);
        // Expired and still failing: the connection that needs a token hears why.
        let e = cache.token(at(100)).expect_err("no valid token");
        assert!(
            e.contains("the identity provider is down") && e.contains("failure 4 in a row"),
            "{e}"
        );
        let e = cache.token(at(101)).expect_err("in the backoff");
        assert!(e.contains("the identity provider is down"), "{e}");
        assert_eq!(fake.calls.load(Ordering::SeqCst), 5);
        // The provider recovers: the next attempt after the backoff gets a token.
        fake.fail.store(false, Ordering::SeqCst);
        *lock(&fake.now) = at(200);
        assert_eq!(value(cache.token(at(200))), "token6");
    }

    #[test]
    fn the_backoff_is_capped() {
        let (fake, cache) = fake();
        fake.fail.store(true, Ordering::SeqCst);
        let mut last = String::new();
        for i in 0..12 {
            last = cache.token(at(i * 31)).expect_err("failing");
        }
        assert_eq!(
            fake.calls.load(Ordering::SeqCst),
            12,
            "never more than 30 s apart"
        );
        assert!(
            last.contains("failure 12 in a row") && last.contains("asked again in 30s"),
            "{last}"
        );
    }

    /// A scratch file holding `content`.
    fn token_file(name: &str, content: &str) -> TokenFile {
        let dir = std::env::temp_dir().join(format!("kc-token-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join(name);
        std::fs::write(&path, content).expect("write");
        TokenFile::new(path)
    }

    fn b64(json: &str) -> String {
        use base64::Engine as _;
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json)
    }

    #[test]
    fn a_token_file_gives_the_jwt_its_exp_and_its_sub() {
        let jwt = format!(
            "{}.{}.",
            b64(r#"{"alg":"none"}"#),
            b64(r#"{"sub":"svc-leader","exp":2000000000}"#)
        );
        let file = token_file("good", &format!("{jwt}\n"));
        let token = file.token().expect("a token");
        assert_eq!(token.value, jwt, "the newline is not part of the token");
        assert_eq!(
            token.expires_at(),
            SystemTime::UNIX_EPOCH + Duration::from_secs(2_000_000_000)
        );
        assert_eq!(token.principal(), Some("svc-leader"));
        assert!(!format!("{file:?}").contains("eyJ"));
        // Read again on each call: a sidecar's new token is used at the next refresh.
        let newer = format!(
            "{}.{}.sig",
            b64(r#"{"alg":"none"}"#),
            b64(r#"{"exp":2000000600}"#)
        );
        std::fs::write(file.path(), &newer).expect("rewrite");
        let token = file.token().expect("the new token");
        assert_eq!(token.value, newer);
        assert_eq!(token.principal(), None);
    }

    #[test]
    fn a_bad_token_file_is_named_with_what_is_wrong_and_never_its_content() {
        let missing = TokenFile::new("/nonexistent/kc-token");
        let e = missing.token().expect_err("missing");
        assert!(
            e.contains("cannot read the OAUTHBEARER token file /nonexistent/kc-token"),
            "{e}"
        );
        let secret = b64(r#"{"sub":"hidden-subject-77"}"#);
        for (name, content, says) in [
            ("empty", "\n".to_owned(), "is empty"),
            ("words", "not-a-jwt-9f2".to_owned(), "does not hold a JWT"),
            (
                "two-parts",
                format!("{}.{secret}", b64(r#"{"alg":"none"}"#)),
                "does not hold a JWT",
            ),
            (
                "not-json",
                format!("{}.{}.", b64("{\"alg\""), b64("[1,2]")),
                "does not hold a JWT",
            ),
            (
                "no-exp",
                format!("{}.{secret}.", b64(r#"{"alg":"none"}"#)),
                "without an exp claim",
            ),
            (
                "bad-exp",
                format!("{}.{}.", b64(r#"{"alg":"none"}"#), b64(r#"{"exp":"soon"}"#)),
                "exp claim is not a time",
            ),
        ] {
            let file = token_file(name, &content);
            let e = file.token().expect_err(name);
            assert!(
                e.starts_with(&format!(
                    "the OAUTHBEARER token file {} ",
                    file.path().display()
                )) && e.contains(says),
                "{name}: {e}"
            );
            assert!(
                !e.contains("not-a-jwt-9f2") && !e.contains(&secret) && !e.contains("eyJ"),
                "{name}: {e}"
            );
        }
    }

    #[test]
    fn an_expired_or_malformed_token_from_the_provider_is_refused() {
        let cache = TokenCache::new(Arc::new(|| Ok(OAuthToken::new(SECRET, at(10)))));
        let e = cache.token(at(20)).expect_err("expired");
        assert!(e.contains("expired already (10s ago)"), "{e}");
        let cache = TokenCache::new(Arc::new(|| Ok(OAuthToken::new("bad token", at(10)))));
        let e = cache.token(at(0)).expect_err("malformed");
        assert!(e.contains("RFC 6750") && !e.contains("bad token"), "{e}");
    }
}
