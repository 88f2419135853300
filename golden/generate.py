#!/usr/bin/env python3
"""Writes the golden vectors of the coordination record format, partition rule and token
comparison (for implementations to agree on; not an order of leaders: see golden/README.md).

This generator is deliberately independent of the Rust crate: it encodes records from the
layouts in golden/README.md, "The format" (struct.pack, big-endian, Kafka strings), hashes role
names with its own murmur2, and derives the expected error of every malformed input with its own reference decoder that follows
the precedence written in golden/README.md. The Rust test (core/tests/golden.rs) and the Java
check (golden/java) then hold the implementations to these files.

Usage:
    python3 golden/generate.py           # rewrite golden/*.json
    python3 golden/generate.py --check   # exit 1 if a file differs from what would be written

Standard library only; Python 3.8 or newer.
"""

import json
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SCHEMA_VERSION = 1

I16_MIN, I16_MAX = -(2**15), 2**15 - 1
I64_MIN, I64_MAX = -(2**63), 2**63 - 1
I32_MAX = 2**31 - 1

# ---------------------------------------------------------------------------------------------
# Compact byte and text values.
#
# A value is a list of pieces; a piece is ("lit", data) or ("rep", data, count). Text pieces hold
# str, byte pieces hold bytes. In JSON a value with one literal piece is a plain string, one
# repeat piece is {"repeat": ..., "count": n}, anything else is an array of those two forms.
# ---------------------------------------------------------------------------------------------


def lit(data):
    return [("lit", data)]


def rep(data, count):
    return [("rep", data, count)]


def text_value(pieces):
    return "".join(p[1] if p[0] == "lit" else p[1] * p[2] for p in pieces)


def bytes_value(pieces):
    return b"".join(p[1] if p[0] == "lit" else p[1] * p[2] for p in pieces)


def merge(pieces):
    """Joins adjacent literal pieces and drops empty ones."""
    out = []
    for p in pieces:
        if p[0] == "lit":
            if not p[1]:
                continue
            if out and out[-1][0] == "lit":
                out[-1] = ("lit", out[-1][1] + p[1])
                continue
        elif p[2] == 0 or not p[1]:
            continue
        out.append(p)
    return out


def piece_json(p, as_hex):
    if p[0] == "lit":
        return p[1].hex() if as_hex else p[1]
    return {"repeat": p[1].hex() if as_hex else p[1], "count": p[2]}


def value_json(pieces, as_hex):
    pieces = merge(pieces)
    if not pieces:
        return ""
    if len(pieces) == 1:
        return piece_json(pieces[0], as_hex)
    return [piece_json(p, as_hex) for p in pieces]


def text_json(pieces):
    return value_json(pieces, as_hex=False)


def hex_json(pieces):
    return value_json(pieces, as_hex=True)


def text_to_bytes(pieces):
    out = []
    for p in pieces:
        if p[0] == "lit":
            out.append(("lit", p[1].encode("utf-8")))
        else:
            out.append(("rep", p[1].encode("utf-8"), p[2]))
    return out


def byte_len(pieces):
    return sum(len(p[1]) if p[0] == "lit" else len(p[1]) * p[2] for p in pieces)


def cut(pieces, n):
    """The first n bytes of a byte value, still compact."""
    out = []
    for p in pieces:
        size = len(p[1]) if p[0] == "lit" else len(p[1]) * p[2]
        if n <= 0:
            break
        if size <= n:
            out.append(p)
            n -= size
        elif p[0] == "lit":
            out.append(("lit", p[1][:n]))
            n = 0
        else:
            whole, part = divmod(n, len(p[1]))
            out.append(("rep", p[1], whole))
            out.append(("lit", p[1][:part]))
            n = 0
    return merge(out)


def as_text(s):
    return s if isinstance(s, list) else lit(s)


# ---------------------------------------------------------------------------------------------
# The layouts (golden/README.md, "The format"): every integer big-endian and signed; a string is an int16 byte
# length followed by that many bytes of UTF-8.
# ---------------------------------------------------------------------------------------------


def i16(v):
    return lit(struct.pack(">h", v))


def i64(v):
    return lit(struct.pack(">q", v))


def string(text):
    utf8 = text_to_bytes(text)
    n = byte_len(utf8)
    assert 0 <= n <= I16_MAX, n
    return i16(n) + utf8


KIND_CODE = {"registration": 0, "lease": 1}


def encode_key(kind, role, member):
    return i16(0) + i16(KIND_CODE[kind]) + string(role) + string(member)


def encode_registration(member, registered_at):
    return i16(0) + string(member) + i64(registered_at)


def encode_lease(member, producer_id, producer_epoch, granted_at, deadline):
    return (
        i16(0)
        + string(member)
        + i64(producer_id)
        + i16(producer_epoch)
        + i64(granted_at)
        + i64(deadline)
    )


# ---------------------------------------------------------------------------------------------
# Kafka's murmur2 (Utils.murmur2) and Utils.toPositive, written from the algorithm.
# ---------------------------------------------------------------------------------------------

MASK32 = 0xFFFFFFFF


def murmur2(data):
    m = 0x5BD1E995
    h = (0x9747B28C ^ len(data)) & MASK32
    n4 = len(data) // 4
    for i in range(n4):
        k = int.from_bytes(data[4 * i : 4 * i + 4], "little")
        k = (k * m) & MASK32
        k ^= k >> 24
        k = (k * m) & MASK32
        h = (h * m) & MASK32
        h ^= k
    tail = data[4 * n4 :]
    if len(tail) == 3:
        h ^= tail[2] << 16
    if len(tail) >= 2:
        h ^= tail[1] << 8
    if len(tail) >= 1:
        h ^= tail[0]
        h = (h * m) & MASK32
    h ^= h >> 13
    h = (h * m) & MASK32
    h ^= h >> 15
    return h - 2**32 if h >= 2**31 else h


def to_positive(n):
    return n & 0x7FFFFFFF


# ---------------------------------------------------------------------------------------------
# Reference decoder: the expected failure of malformed bytes, in the precedence of README.md.
# Returns None for well-formed bytes, else (kind, field).
# ---------------------------------------------------------------------------------------------


class Malformed(Exception):
    def __init__(self, kind, field):
        super().__init__(kind, field)
        self.kind = kind
        self.field = field


class Reader:
    def __init__(self, data):
        self.data = data
        self.pos = 0

    def left(self):
        return len(self.data) - self.pos

    def fixed(self, size, fmt, field):
        if self.left() < size:
            raise Malformed("truncated", field)
        (v,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return v

    def i16(self, field):
        return self.fixed(2, ">h", field)

    def i64(self, field):
        return self.fixed(8, ">q", field)

    def version(self):
        if self.i16("version") != 0:
            raise Malformed("unknown_version", "version")

    def string(self, field):
        n = self.i16(field)
        if n < 0:
            raise Malformed("negative_length", field)
        if n > self.left():
            raise Malformed("overlong", field)
        raw = self.data[self.pos : self.pos + n]
        self.pos += n
        try:
            return raw.decode("utf-8", errors="strict")
        except UnicodeDecodeError:
            raise Malformed("invalid_utf8", field) from None

    def name(self, field):
        s = self.string(field)
        if s == "":
            raise Malformed("empty_name", field)
        return s

    def finish(self):
        if self.left() != 0:
            raise Malformed("trailing_bytes", None)


def decode(part, data):
    r = Reader(data)
    try:
        r.version()
        if part == "key":
            kind = r.i16("kind")
            if kind not in (0, 1):
                raise Malformed("unknown_kind", "kind")
            role = r.name("role")
            if kind == 0:
                value = ("registration", role, r.name("member"))
            else:
                if r.string("member") != "":
                    raise Malformed("lease_key_with_member", "member")
                value = ("lease", role, "")
        elif part == "registration_value":
            value = (r.name("member"), r.i64("registeredAt"))
        elif part == "lease_value":
            value = (
                r.name("member"),
                r.i64("producerID"),
                r.i16("producerEpoch"),
                r.i64("grantedAt"),
                r.i64("deadline"),
            )
        else:
            raise ValueError(part)
        r.finish()
    except Malformed as e:
        return None, (e.kind, e.field)
    return value, None


# ---------------------------------------------------------------------------------------------
# Vectors.
# ---------------------------------------------------------------------------------------------

LONG_ROLE = rep("r", I16_MAX)
LONG_MEMBER = rep("m", I16_MAX)
TS = 1_700_000_000_000  # 2023-11-14T22:13:20Z

# Names chosen to catch the usual porting mistakes: multi-byte UTF-8 (lengths are bytes, not
# characters), a NUL and a supplementary character (Java's modified UTF-8 / DataOutput.writeUTF
# writes both differently), lengths whose low byte has the sign bit set.
NON_ASCII_ROLES = [
    ("latin-1 supplement", "zahlungsläufe"),
    ("cjk", "注文処理"),
    ("emoji (4-byte UTF-8)", "🦀-role"),
    ("nul inside", "a\u0000b"),
    ("bmp edge U+FFFF and U+10FFFF", "edge-\uffff-\U0010ffff"),
]
NON_ASCII_MEMBERS = [
    ("cyrillic", "узел-1"),
    ("greek and combining mark", "κόμβος-e\u0301"),
    ("emoji (4-byte UTF-8)", "host-🚀"),
    ("nul inside", "m\u0000"),
]


def keys():
    v = []

    def add(name, kind, role, member):
        role, member = as_text(role), as_text(member)
        v.append(
            {
                "name": name,
                "kind": kind,
                "role": text_json(role),
                "member": text_json(member),
                "hex": hex_json(encode_key(kind, role, member)),
            }
        )

    add("registration", "registration", "orders", "node-a")
    add("lease", "lease", "orders", "")
    add("registration, one-byte names", "registration", "r", "m")
    add("lease, one-byte role", "lease", "r", "")
    add("registration, dotted role", "registration", "billing.invoice-writer v2", "10.0.0.7:9092")
    for label, role in NON_ASCII_ROLES:
        add("registration, role " + label, "registration", role, "node-a")
        add("lease, role " + label, "lease", role, "")
    for label, member in NON_ASCII_MEMBERS:
        add("registration, member " + label, "registration", "orders", member)
    add("registration, role of 127 bytes", "registration", "a" * 127, "m")
    add("registration, role of 128 bytes", "registration", "b" * 128, "m")
    add("registration, member of 255 bytes", "registration", "r", "c" * 255)
    add("registration, member of 256 bytes", "registration", "r", "d" * 256)
    add("lease, role of 32767 bytes", "lease", LONG_ROLE, "")
    add("registration, role and member of 32767 bytes", "registration", LONG_ROLE, LONG_MEMBER)
    add(
        "registration, member of 32767 bytes of 3-byte UTF-8 split over pieces",
        "registration",
        "orders",
        lit("€") + rep("注", 10920) + lit("xxxx"),  # 3 + 3 * 10920 + 4 = 32767 bytes
    )
    return v


def registrations():
    v = []

    def add(name, member, registered_at):
        member = as_text(member)
        v.append(
            {
                "name": name,
                "member": text_json(member),
                "registered_at": registered_at,
                "hex": hex_json(encode_registration(member, registered_at)),
            }
        )

    add("typical", "node-a", TS)
    add("epoch zero", "node-a", 0)
    add("one millisecond before the epoch", "node-a", -1)
    add("a day before the epoch", "node-b", -86_400_000)
    add("i64 min", "m", I64_MIN)
    add("i64 max", "m", I64_MAX)
    add("bytes with the sign bit set", "m", 0x0080FF7F80FF7F80)
    add("negative with mixed bytes", "m", -0x0102030405060708)
    for label, member in NON_ASCII_MEMBERS:
        add("member " + label, member, TS)
    add("member of 128 bytes", "e" * 128, TS)
    add("member of 32767 bytes", LONG_MEMBER, TS)
    return v


def leases():
    v = []

    def add(name, member, pid, epoch, granted, deadline):
        member = as_text(member)
        v.append(
            {
                "name": name,
                "member": text_json(member),
                "producer_id": pid,
                "producer_epoch": epoch,
                "granted_at": granted,
                "deadline": deadline,
                "hex": hex_json(encode_lease(member, pid, epoch, granted, deadline)),
            }
        )

    add("typical", "node-a", 7042, 3, TS, TS + 10_000)
    add("epoch 0", "node-a", 7042, 0, TS, TS + 10_000)
    add("epoch 32766 (last before exhaustion)", "node-a", 7042, 32766, TS, TS + 10_000)
    add("epoch 32767 (i16 max)", "node-a", 7042, I16_MAX, TS, TS + 10_000)
    add("fresh producer id after exhaustion", "node-a", 7043, 0, TS, TS + 10_000)
    add("producer id 0", "node-a", 0, 1, TS, TS + 10_000)
    add("producer id i64 max", "node-a", I64_MAX, 5, TS, TS + 10_000)
    add("producer id i64 min, epoch i16 min", "node-a", I64_MIN, I16_MIN, TS, TS + 10_000)
    add("the NO_EPOCH pair on the wire", "node-a", -1, -1, 0, 0)
    add("epoch with the sign bit of its low byte set", "node-a", 1, 0x0080, TS, TS + 1)
    add("epoch 255 and 256", "node-a", 1, 255, 256, 257)
    add("negative timestamps", "node-b", 12, 4, -86_400_000, -1)
    add("deadline before granted_at", "node-b", 12, 4, TS, TS - 1)
    add("i64 extremes as times", "node-b", 12, 4, I64_MIN, I64_MAX)
    add("bytes with the sign bit set", "m", 0x0080FF7F80FF7F80, 0x7F80, -0x0102030405060708, 0x00FF)
    for label, member in NON_ASCII_MEMBERS:
        add("member " + label, member, 99, 1, TS, TS + 5_000)
    add("member of 32767 bytes", LONG_MEMBER, 99, 1, TS, TS + 5_000)
    return v


def malformed():
    v = []
    names = set()

    def add(name, part, data, expect):
        """`expect` is what the bytes were built to show; the reference decoder must agree."""
        data = merge(data)
        got, err = decode(part, bytes_value(data))
        assert got is None, (name, got)
        assert err == expect, (name, err, expect)
        assert name not in names, name
        names.add(name)
        v.append(
            {
                "name": name,
                "part": part,
                "hex": hex_json(data),
                "kind": err[0],
                "field": err[1],
            }
        )

    samples = {
        "key": [
            ("registration key", encode_key("registration", lit("r"), lit("m"))),
            ("lease key", encode_key("lease", lit("r"), lit(""))),
        ],
        "registration_value": [("registration value", encode_registration(lit("m"), TS))],
        "lease_value": [("lease value", encode_lease(lit("m"), 7042, 3, TS, TS + 10_000))],
    }

    # Every proper prefix of a small valid encoding, including the empty input (what a tombstone
    # looks like if it is decoded as a value by mistake).
    for part, items in samples.items():
        for label, enc in items:
            full = bytes_value(enc)
            for n in range(len(full)):
                _, err = decode(part, full[:n])
                add(f"{label} cut to {n} bytes", part, lit(full[:n]), err)
    # A string body cut inside a multi-byte character: the length prefix then overruns.
    enc = encode_registration(lit("ä"), TS)
    add("registration value cut inside a 2-byte character", "registration_value", cut(enc, 5), ("overlong", "member"))
    # The same for the long member: the prefix claims 32767 bytes and 32766 follow.
    enc = encode_lease(LONG_MEMBER, 1, 1, TS, TS)
    add("lease value with a 32767-byte member cut by one byte", "lease_value", cut(enc, 4 + I16_MAX - 1), ("overlong", "member"))

    # Trailing bytes.
    for part, items in samples.items():
        for label, enc in items:
            add(f"{label} + one zero byte", part, enc + lit(b"\x00"), ("trailing_bytes", None))
            add(f"{label} twice", part, enc + enc, ("trailing_bytes", None))
    add(
        "key with 32767-byte names + one byte",
        "key",
        encode_key("registration", LONG_ROLE, LONG_MEMBER) + lit(b"\xff"),
        ("trailing_bytes", None),
    )

    # Unknown version, for every part; the rest of the record is valid.
    for version in (1, -1, 256, I16_MAX, I16_MIN):
        vb = struct.pack(">h", version)
        for part, items in samples.items():
            label, enc = items[0]
            body = bytes_value(enc)[2:]
            add(f"{label} with version {version}", part, lit(vb + body), ("unknown_version", "version"))
    # The version is checked before anything else is read.
    add("unknown version and nothing else", "lease_value", i16(1), ("unknown_version", "version"))
    add("unknown version then trailing garbage", "key", i16(2) + lit(b"\xff" * 7), ("unknown_version", "version"))

    # Unknown key kind.
    for kind in (2, -1, 256, I16_MAX, I16_MIN):
        add(
            f"key with kind {kind}",
            "key",
            i16(0) + i16(kind) + string(lit("r")) + string(lit("m")),
            ("unknown_kind", "kind"),
        )
    add("key with kind 2 and nothing after it", "key", i16(0) + i16(2), ("unknown_kind", "kind"))

    # Negative string lengths (-1 is Kafka's null string, which the format does not allow).
    for n in (-1, I16_MIN):
        add(f"key role length {n}", "key", i16(0) + i16(0) + i16(n) + lit(b"r") + string(lit("m")), ("negative_length", "role"))
        add(f"registration key member length {n}", "key", i16(0) + i16(0) + string(lit("r")) + i16(n), ("negative_length", "member"))
        add(f"lease key member length {n}", "key", i16(0) + i16(1) + string(lit("r")) + i16(n), ("negative_length", "member"))
        add(f"registration value member length {n}", "registration_value", i16(0) + i16(n) + i64(TS), ("negative_length", "member"))
        add(
            f"lease value member length {n}",
            "lease_value",
            i16(0) + i16(n) + i64(1) + i16(1) + i64(TS) + i64(TS),
            ("negative_length", "member"),
        )

    # Length prefixes longer than what follows.
    add("key role claims 10 bytes, 3 follow", "key", i16(0) + i16(0) + i16(10) + lit(b"abc"), ("overlong", "role"))
    add("key role claims 1 byte, none follow", "key", i16(0) + i16(1) + i16(1), ("overlong", "role"))
    add("registration key member claims 2 bytes, 1 follows", "key", i16(0) + i16(0) + string(lit("r")) + i16(2) + lit(b"m"), ("overlong", "member"))
    add("lease key member claims 1 byte, none follow", "key", i16(0) + i16(1) + string(lit("r")) + i16(1), ("overlong", "member"))
    add(
        "registration value member claims 32767 bytes",
        "registration_value",
        i16(0) + i16(I16_MAX) + lit(b"m") + i64(TS),
        ("overlong", "member"),
    )
    rest = i64(1) + i16(1) + i64(TS) + i64(TS)  # 26 bytes after the member
    add(
        "lease value member length runs one byte past the end",
        "lease_value",
        i16(0) + i16(1 + 26 + 1) + lit(b"m") + rest,
        ("overlong", "member"),
    )
    # A length that fits the buffer but swallows the numbers: the decoder reads the wrong bytes
    # as the member and then runs out for producerID.
    add(
        "lease value member length swallows the numbers",
        "lease_value",
        i16(0) + i16(1 + 26) + lit(b"m") + i64(0x2020202020202020) + i16(0x2020) + i64(0x2020202020202020) + i64(0x2020202020202020),
        ("truncated", "producerID"),
    )

    # Invalid UTF-8. The second and third are what Java's DataOutput.writeUTF produces for a NUL
    # and for a supplementary character (modified UTF-8 / CESU-8); the format is plain UTF-8.
    bad_utf8 = [
        ("0xff", b"\xff"),
        ("overlong NUL (modified UTF-8)", b"\xc0\x80"),
        ("surrogate pair (CESU-8 of U+1F980)", b"\xed\xa0\xbe\xed\xb6\x80"),
        ("lone continuation byte", b"\x80"),
        ("2-byte sequence cut short", b"a\xc3"),
        ("beyond U+10FFFF", b"\xf4\x90\x80\x80"),
        ("latin-1 instead of UTF-8", b"zahlungsl\xe4ufe"),
    ]
    for label, raw in bad_utf8:
        s = i16(len(raw)) + lit(raw)
        add(f"key role {label}", "key", i16(0) + i16(0) + s + string(lit("m")), ("invalid_utf8", "role"))
        add(f"registration key member {label}", "key", i16(0) + i16(0) + string(lit("r")) + s, ("invalid_utf8", "member"))
        add(f"registration value member {label}", "registration_value", i16(0) + s + i64(TS), ("invalid_utf8", "member"))
        add(f"lease value member {label}", "lease_value", i16(0) + s + i64(1) + i16(1) + i64(TS) + i64(TS), ("invalid_utf8", "member"))
    # A lease key's member is decoded as a string first, so invalid UTF-8 there is invalid_utf8.
    add("lease key member 0xff", "key", i16(0) + i16(1) + string(lit("r")) + i16(1) + lit(b"\xff"), ("invalid_utf8", "member"))

    # Empty names.
    add("registration key with empty role", "key", encode_key("registration", lit(""), lit("m")), ("empty_name", "role"))
    add("lease key with empty role", "key", encode_key("lease", lit(""), lit("")), ("empty_name", "role"))
    add("lease key with empty role and a member", "key", encode_key("lease", lit(""), lit("m")), ("empty_name", "role"))
    add("registration key with empty member", "key", encode_key("registration", lit("r"), lit("")), ("empty_name", "member"))
    add("registration value with empty member", "registration_value", encode_registration(lit(""), TS), ("empty_name", "member"))
    add("lease value with empty member", "lease_value", encode_lease(lit(""), 1, 1, TS, TS), ("empty_name", "member"))

    # A lease key must carry the empty member.
    add("lease key with member", "key", encode_key("lease", lit("r"), lit("m")), ("lease_key_with_member", "member"))
    add("lease key with a 32767-byte member", "key", encode_key("lease", lit("orders"), LONG_MEMBER), ("lease_key_with_member", "member"))
    add(
        "lease key with member and trailing bytes",
        "key",
        encode_key("lease", lit("r"), lit("m")) + lit(b"\x00"),
        ("lease_key_with_member", "member"),
    )

    # One part's bytes decoded as another part.
    reg_key = encode_key("registration", lit("r"), lit("m"))
    reg_val = encode_registration(lit("m"), TS)
    lease_val = encode_lease(lit("m"), 7042, 3, TS, TS + 10_000)
    add("registration key decoded as a registration value", "registration_value", reg_key, ("empty_name", "member"))
    add("registration value decoded as a lease value", "lease_value", reg_val, ("truncated", "producerEpoch"))
    add("lease value decoded as a registration value", "registration_value", lease_val, ("trailing_bytes", None))
    add("registration value decoded as a key", "key", reg_val, ("overlong", "role"))
    return v


def partitions():
    counts = [1, 2, 7, 16, 50, 1000, I32_MAX]
    roles = []
    abc = "abcdefghijklm"
    for n in range(len(abc) + 1):  # every tail length of the 4-byte blocks, empty included
        roles.append((f"prefix of length {n}", lit(abc[:n])))
    for name in ["orders", "payments", "billing.invoice-writer", "leader", "__coordination_state", "kafka"]:
        roles.append((name, lit(name)))
    for i in range(40):
        roles.append((f"role-{i}", lit(f"role-{i}")))
    roles.append(("32-byte role", lit("payments-settlement-writer-eu-01")))
    for label, role in NON_ASCII_ROLES:
        roles.append((label, lit(role)))
    roles.append(("all byte values 0x00-0x7f", lit("".join(chr(c) for c in range(128)))))
    roles.append(("1000 bytes", rep("x", 1000)))
    roles.append(("32767 bytes", LONG_ROLE))

    v = []
    negatives = 0
    for label, role in roles:
        data = bytes_value(text_to_bytes(role))
        h = murmur2(data)
        negatives += h < 0
        v.append(
            {
                "name": label,
                "role": text_json(role),
                "murmur2": h,
                "to_positive": to_positive(h),
                "partitions": [{"count": c, "partition": to_positive(h) % c} for c in counts],
            }
        )
    assert negatives >= 10, negatives
    return v


def tokens():
    no_epoch = (-1, -1)

    def key(t):
        # NO_EPOCH is the least value; every other pair compares by producer id, then epoch.
        # The comparison implementations agree on, not an order of leaders: a newer pair can
        # have a smaller producer id (golden/README.md, tokens.json).
        return (0,) if t == no_epoch else (1, t[0], t[1])

    def order(a, b):
        ka, kb = key(a), key(b)
        return (ka > kb) - (ka < kb)

    pairs = [
        ("exhaustion: 7/32766 before 8/0", (7, 32766), (8, 0)),
        ("exhaustion at i16 max: 7/32767 before 8/0", (7, I16_MAX), (8, 0)),
        ("producer id read first", (2, 0), (1, I16_MAX)),
        ("epoch within one producer id", (7, 1), (7, 2)),
        ("epoch 0 before 32767", (7, 0), (7, I16_MAX)),
        ("equal pairs", (7, 2), (7, 2)),
        ("equal at the extremes", (I64_MAX, I16_MAX), (I64_MAX, I16_MAX)),
        ("NO_EPOCH equals itself", no_epoch, no_epoch),
        ("NO_EPOCH below 0/0", no_epoch, (0, 0)),
        ("0/0 above NO_EPOCH", (0, 0), no_epoch),
        ("NO_EPOCH below -1/0", no_epoch, (-1, 0)),
        ("NO_EPOCH below -1/-2", no_epoch, (-1, -2)),
        ("NO_EPOCH below i64 min/i16 min", no_epoch, (I64_MIN, I16_MIN)),
        ("NO_EPOCH below i64 max/i16 max", no_epoch, (I64_MAX, I16_MAX)),
        ("producer ids compare signed", (-2, 0), (I64_MAX, 0)),
        ("negative producer ids", (-5, 3), (-4, 0)),
        ("epochs compare signed", (7, -1), (7, 0)),
        ("i64 max producer id above its predecessor", (I64_MAX, 0), (I64_MAX - 1, I16_MAX)),
        ("large fresh id after exhaustion", (I64_MAX - 1, 32766), (I64_MAX, 0)),
    ]
    v = []
    for name, a, b in pairs:
        v.append(
            {
                "name": name,
                "a": {"producer_id": a[0], "producer_epoch": a[1]},
                "b": {"producer_id": b[0], "producer_epoch": b[1]},
                "order": order(a, b),
            }
        )
    return v


FILES = {
    "keys.json": (keys, "Keys of both kinds: fields and their encoding."),
    "registrations.json": (registrations, "Registration values: fields and their encoding."),
    "leases.json": (leases, "Lease values: fields and their encoding."),
    "malformed.json": (malformed, "Bytes that must fail to decode, with the part, kind and field of the failure."),
    "partitions.json": (partitions, "Kafka's murmur2 of role names and the partition for several partition counts."),
    "tokens.json": (
        tokens,
        "Pairs of fencing tokens and the sign of compare(a, b): the comparison every"
        " implementation computes alike, not an order of leaders (a newer pair can have a"
        " smaller producer id; see golden/README.md).",
    ),
}


def self_check(name, vectors):
    """Round-trips the well-formed vectors through the reference decoder."""
    def expand_text(j):
        return "".join(expand(j, str))

    def expand(j, kind):
        if isinstance(j, str):
            return [j]
        if isinstance(j, dict):
            return [j["repeat"] * j["count"]]
        return [x for p in j for x in expand(p, kind)]

    seen = set()
    for vec in vectors:
        assert vec["name"] not in seen, (name, vec["name"])
        seen.add(vec["name"])
        if "hex" in vec:
            data = bytes.fromhex("".join(expand(vec["hex"], str)))
        if name == "keys.json":
            got, err = decode("key", data)
            assert err is None and got == (vec["kind"], expand_text(vec["role"]), expand_text(vec["member"])), vec["name"]
        elif name == "registrations.json":
            got, err = decode("registration_value", data)
            assert err is None and got == (expand_text(vec["member"]), vec["registered_at"]), vec["name"]
        elif name == "leases.json":
            got, err = decode("lease_value", data)
            want = (expand_text(vec["member"]), vec["producer_id"], vec["producer_epoch"], vec["granted_at"], vec["deadline"])
            assert err is None and got == want, vec["name"]


def render(description, vectors):
    lines = [
        "{",
        f'  "schema_version": {SCHEMA_VERSION},',
        f'  "description": {json.dumps(description)},',
        '  "vectors": [',
    ]
    body = [json.dumps(vec, ensure_ascii=False, separators=(", ", ": ")) for vec in vectors]
    lines.append(",\n".join("    " + b for b in body))
    lines.append("  ]")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv):
    check = "--check" in argv[1:]
    stale = []
    for name, (make, description) in FILES.items():
        vectors = make()
        assert vectors, name
        self_check(name, vectors)
        text = render(description, vectors)
        path = os.path.join(HERE, name)
        if check:
            try:
                with open(path, encoding="utf-8") as f:
                    if f.read() != text:
                        stale.append(name)
            except FileNotFoundError:
                stale.append(name)
        else:
            with open(path, "w", encoding="utf-8", newline="\n") as f:
                f.write(text)
            print(f"{name}: {len(vectors)} vectors")
    if stale:
        print("out of date (run python3 golden/generate.py): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
