//! What a fleet member tells the others about itself. It travels as the member id of the
//! member's heartbeat candidacy in the fleet topic (see the module docs): `kc-fleet/1` followed
//! by `;key=value` fields, values percent-encoded where they hold `;`, `=`, `%` or a control
//! character. Unknown keys are ignored, so later versions can add fields.

use super::fleet_error::FleetError;
use super::preference::{Policy, Version};

const PREFIX: &str = "kc-fleet/1";

/// A member as it announces itself.
#[derive(Clone, Debug, PartialEq)]
pub struct Announcement {
    /// The member id its role candidacies use.
    pub member: String,
    /// Its weight (greater than 0).
    pub weight: f64,
    /// Its version, if it gave one.
    pub version: Option<Version>,
    /// Whether it is ready to lead (a member warming up says no).
    pub ready: bool,
    /// Whether it is draining: it hands every role away and takes none.
    pub draining: bool,
    /// The fleet policy it balances with.
    pub policy: Policy,
    /// A digest of the roles it hosts and their count (see [`roles_digest`]): members that
    /// announce the same one balance with bounded loads, the others by rendezvous alone.
    pub roles: Option<(u64, usize)>,
    /// Its candidacies' lease duration and renew interval, in milliseconds: what an observer
    /// needs to judge its heartbeat (see `observe::heartbeat_is_live`).
    pub timing: Option<(u64, u64)>,
}

/// A digest of a set of role names, given in sorted order: FNV-1a over the names, each
/// followed by a zero byte. Fixed, as the preference hash is.
pub fn roles_digest<'a>(sorted: impl IntoIterator<Item = &'a str>) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for name in sorted {
        for b in name.bytes().chain(std::iter::once(0)) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

impl Announcement {
    /// The heartbeat member id that carries this announcement.
    pub fn encode(&self) -> String {
        let mut out = String::from(PREFIX);
        field(&mut out, "m", &self.member);
        field(&mut out, "w", &format!("{}", self.weight));
        if let Some(v) = &self.version {
            field(&mut out, "v", v.as_str());
        }
        field(&mut out, "r", if self.ready { "1" } else { "0" });
        field(&mut out, "d", if self.draining { "1" } else { "0" });
        field(&mut out, "p", self.policy.as_str());
        if let Some((digest, count)) = self.roles {
            field(&mut out, "h", &format!("{digest:016x}-{count}"));
        }
        if let Some((lease, renew)) = self.timing {
            field(&mut out, "t", &format!("{lease}-{renew}"));
        }
        out
    }

    /// Reads a heartbeat member id. Anything that is not an announcement of this format, or
    /// has a field that does not parse, is an error naming the id.
    pub fn decode(id: &str) -> Result<Announcement, FleetError> {
        let bad = |why: &str| FleetError::BadAnnouncement {
            id: id.to_owned(),
            why: why.to_owned(),
        };
        let rest = id
            .strip_prefix(PREFIX)
            .ok_or_else(|| bad("no kc-fleet/1 prefix"))?;
        let (mut member, mut weight, mut version, mut ready, mut draining, mut policy) =
            (None, None, None, None, None, None);
        let mut roles = None;
        let mut timing = None;
        for part in rest.split(';').skip(1) {
            let (key, value) = part
                .split_once('=')
                .ok_or_else(|| bad("a field without ="))?;
            let value = unescape(value).ok_or_else(|| bad("a bad %-escape"))?;
            match key {
                "m" => member = Some(value),
                "w" => {
                    let w: f64 = value
                        .parse()
                        .map_err(|_| bad("a weight that is not a number"))?;
                    weight = Some(w);
                }
                "v" => version = Some(Version::parse(&value).map_err(|_| bad("a bad version"))?),
                "r" => ready = Some(value == "1"),
                "d" => draining = Some(value == "1"),
                "p" => {
                    policy = Some(
                        value
                            .parse::<Policy>()
                            .map_err(|_| bad("an unknown policy"))?,
                    )
                }
                "h" => {
                    let (digest, count) = value.split_once('-').ok_or_else(|| bad("a bad h"))?;
                    let digest = u64::from_str_radix(digest, 16).map_err(|_| bad("a bad h"))?;
                    let count = count.parse::<usize>().map_err(|_| bad("a bad h"))?;
                    roles = Some((digest, count));
                }
                "t" => {
                    let (lease, renew) = value.split_once('-').ok_or_else(|| bad("a bad t"))?;
                    let lease = lease.parse::<u64>().map_err(|_| bad("a bad t"))?;
                    let renew = renew.parse::<u64>().map_err(|_| bad("a bad t"))?;
                    timing = Some((lease, renew));
                }
                _ => {}
            }
        }
        let member = member
            .filter(|m| !m.is_empty())
            .ok_or_else(|| bad("no member"))?;
        let weight = weight.ok_or_else(|| bad("no weight"))?;
        if !(weight.is_finite() && weight > 0.0) {
            return Err(bad("a weight that is not above 0"));
        }
        Ok(Announcement {
            member,
            weight,
            version,
            ready: ready.unwrap_or(true),
            draining: draining.unwrap_or(false),
            policy: policy.unwrap_or_default(),
            roles,
            timing,
        })
    }
}

fn field(out: &mut String, key: &str, value: &str) {
    out.push(';');
    out.push_str(key);
    out.push('=');
    for c in value.chars() {
        if matches!(c, ';' | '=' | '%') || c.is_control() {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("%{b:02X}"));
            }
        } else {
            out.push(c);
        }
    }
}

fn unescape(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_announcement_survives_the_trip() {
        let a = Announcement {
            member: "host;a=b%c\n".to_owned(),
            weight: 2.5,
            version: Some(Version::parse("1.4.0").unwrap()),
            ready: false,
            draining: true,
            policy: Policy::PreferNewest,
            roles: Some((0xdead_beef, 3000)),
            timing: Some((30_000, 10_000)),
        };
        let id = a.encode();
        assert!(id.starts_with("kc-fleet/1;m=host%3Ba%3Db%25c%0A;"), "{id}");
        assert_eq!(Announcement::decode(&id).unwrap(), a);
    }

    #[test]
    fn bad_announcements_name_the_id_and_why() {
        for (id, why) in [
            ("host-a", "no kc-fleet/1 prefix"),
            ("kc-fleet/1;w=1", "no member"),
            ("kc-fleet/1;m=a", "no weight"),
            ("kc-fleet/1;m=a;w=0", "not above 0"),
            ("kc-fleet/1;m=a;w=-1", "not above 0"),
            ("kc-fleet/1;m=a;w=NaN", "not above 0"),
            ("kc-fleet/1;m=a;w=x", "not a number"),
            ("kc-fleet/1;m=a;w=1;v=v2", "bad version"),
            ("kc-fleet/1;m=a;w=1;p=fastest", "unknown policy"),
            ("kc-fleet/1;m=a%zz;w=1", "%-escape"),
            ("kc-fleet/1;m", "without ="),
            ("kc-fleet/1;m=a;w=1;h=zz-1", "bad h"),
            ("kc-fleet/1;m=a;w=1;t=30000", "bad t"),
        ] {
            let e = Announcement::decode(id).unwrap_err().to_string();
            assert!(e.contains(id) && e.contains(why), "{id}: {e}");
        }
        // Unknown keys are ignored; missing flags take their defaults.
        let a = Announcement::decode("kc-fleet/1;m=a;w=1;future=x").unwrap();
        assert!(a.ready && !a.draining && a.policy == Policy::Balance && a.version.is_none());
        assert!(a.roles.is_none());
    }
}
