package interop;

import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.Objects;
import org.apache.kafka.common.utils.Utils;

/**
 * The frozen record layouts (golden/README.md, "The format"): every integer big-endian and
 * signed, a string an int16 byte length followed by plain UTF-8 (not Java's modified UTF-8), an
 * empty value a tombstone. Decoding reads the
 * fields in layout order and stops at the first problem (golden/README.md, "Precedence").
 */
public final class Codec {
    private Codec() {}

    public static final short KIND_REGISTRATION = 0;
    public static final short KIND_LEASE = 1;

    /** A decoded key. {@code member} is "" for a lease key. */
    public record Key(short kind, String role, String member) {
        public static Key registration(String role, String member) {
            return new Key(KIND_REGISTRATION, role, member);
        }

        public static Key lease(String role) {
            return new Key(KIND_LEASE, role, "");
        }

        public boolean isLease() {
            return kind == KIND_LEASE;
        }
    }

    public record Registration(String member, long registeredAt) {}

    public record Lease(String member, long producerId, short producerEpoch, long grantedAt, long deadline) {}

    /**
     * The fencing token: a producer id and epoch. {@link #compare} is the comparison of
     * golden/tokens.json (NO_EPOCH, -1/-1, below every other pair; then producer id, then
     * epoch), kept so that the vectors agree. It is not an order of leaders: a newer pair can
     * have a smaller producer id (after a coordinator move), so nothing here fences with it.
     */
    public record Token(long producerId, short producerEpoch) {
        public static final Token NO_EPOCH = new Token(-1, (short) -1);

        public static int compare(Token a, Token b) {
            boolean an = a.equals(NO_EPOCH);
            boolean bn = b.equals(NO_EPOCH);
            if (an || bn) {
                return an == bn ? 0 : (an ? -1 : 1);
            }
            int c = Long.compare(a.producerId, b.producerId);
            return c != 0 ? c : Short.compare(a.producerEpoch, b.producerEpoch);
        }
    }

    /** Malformed bytes: the part that failed, the kind of failure, and the field (null for trailing bytes). */
    public static final class FormatError extends Exception {
        private static final long serialVersionUID = 1L;
        public final String part;
        public final String kind;
        public final String field;

        FormatError(String part, String kind, String field) {
            super(part + ": " + kind + (field == null ? "" : " at " + field));
            this.part = part;
            this.kind = kind;
            this.field = field;
        }
    }

    // ---- the partition of a role --------------------------------------------------------------

    /** Kafka's key partitioning of the role name: toPositive(murmur2(utf8(role))) % partitions. */
    public static int rolePartition(String role, int partitions) {
        if (partitions <= 0) {
            throw new IllegalArgumentException("partitions must be positive, got " + partitions);
        }
        return partitionOfBytes(role.getBytes(StandardCharsets.UTF_8), partitions);
    }

    public static int partitionOfBytes(byte[] bytes, int partitions) {
        return Utils.toPositive(Utils.murmur2(bytes)) % partitions;
    }

    // ---- encoding -------------------------------------------------------------------------------

    public static byte[] encodeKey(Key key) {
        Out o = new Out();
        o.i16((short) 0);
        o.i16(key.kind());
        o.string(key.role());
        o.string(key.member());
        return o.bytes();
    }

    public static byte[] encodeRegistration(Registration r) {
        Out o = new Out();
        o.i16((short) 0);
        o.string(r.member());
        o.i64(r.registeredAt());
        return o.bytes();
    }

    public static byte[] encodeLease(Lease l) {
        Out o = new Out();
        o.i16((short) 0);
        o.string(l.member());
        o.i64(l.producerId());
        o.i16(l.producerEpoch());
        o.i64(l.grantedAt());
        o.i64(l.deadline());
        return o.bytes();
    }

    private static final class Out {
        private final ByteArrayOutputStream buf = new ByteArrayOutputStream();

        void i16(short v) {
            buf.write((v >>> 8) & 0xff);
            buf.write(v & 0xff);
        }

        void i64(long v) {
            for (int shift = 56; shift >= 0; shift -= 8) {
                buf.write((int) (v >>> shift) & 0xff);
            }
        }

        void string(String s) {
            byte[] b = s.getBytes(StandardCharsets.UTF_8);
            if (b.length > Short.MAX_VALUE) {
                throw new IllegalArgumentException("a name longer than 32767 UTF-8 bytes");
            }
            i16((short) b.length);
            buf.write(b, 0, b.length);
        }

        byte[] bytes() {
            return buf.toByteArray();
        }
    }

    // ---- decoding -------------------------------------------------------------------------------

    public static final String PART_KEY = "key";
    public static final String PART_REGISTRATION = "registration_value";
    public static final String PART_LEASE = "lease_value";

    public static Key decodeKey(byte[] bytes) throws FormatError {
        In in = new In(bytes, PART_KEY);
        in.version();
        short kind = in.i16("kind");
        if (kind != KIND_REGISTRATION && kind != KIND_LEASE) {
            throw in.error("unknown_kind", "kind");
        }
        String role = in.name("role");
        String member;
        if (kind == KIND_REGISTRATION) {
            member = in.name("member");
        } else {
            member = in.string("member");
            if (!member.isEmpty()) {
                throw in.error("lease_key_with_member", "member");
            }
        }
        in.end();
        return new Key(kind, role, member);
    }

    public static Registration decodeRegistration(byte[] bytes) throws FormatError {
        In in = new In(bytes, PART_REGISTRATION);
        in.version();
        String member = in.name("member");
        long at = in.i64("registeredAt");
        in.end();
        return new Registration(member, at);
    }

    public static Lease decodeLease(byte[] bytes) throws FormatError {
        In in = new In(bytes, PART_LEASE);
        in.version();
        String member = in.name("member");
        long pid = in.i64("producerID");
        short epoch = in.i16("producerEpoch");
        long granted = in.i64("grantedAt");
        long deadline = in.i64("deadline");
        in.end();
        return new Lease(member, pid, epoch, granted, deadline);
    }

    private static final class In {
        private final ByteBuffer buf;
        private final String part;

        In(byte[] bytes, String part) {
            this.buf = ByteBuffer.wrap(Objects.requireNonNull(bytes)); // big-endian by default
            this.part = part;
        }

        FormatError error(String kind, String field) {
            return new FormatError(part, kind, field);
        }

        void version() throws FormatError {
            if (i16("version") != 0) {
                throw error("unknown_version", "version");
            }
        }

        short i16(String field) throws FormatError {
            if (buf.remaining() < 2) {
                throw error("truncated", field);
            }
            return buf.getShort();
        }

        long i64(String field) throws FormatError {
            if (buf.remaining() < 8) {
                throw error("truncated", field);
            }
            return buf.getLong();
        }

        String string(String field) throws FormatError {
            short len = i16(field);
            if (len < 0) {
                throw error("negative_length", field);
            }
            if (len > buf.remaining()) {
                throw error("overlong", field);
            }
            ByteBuffer slice = buf.slice();
            slice.limit(len);
            buf.position(buf.position() + len);
            try {
                CharBuffer chars = StandardCharsets.UTF_8.newDecoder()
                        .onMalformedInput(CodingErrorAction.REPORT)
                        .onUnmappableCharacter(CodingErrorAction.REPORT)
                        .decode(slice);
                return chars.toString();
            } catch (CharacterCodingException e) {
                throw error("invalid_utf8", field);
            }
        }

        String name(String field) throws FormatError {
            String s = string(field);
            if (s.isEmpty()) {
                throw error("empty_name", field);
            }
            return s;
        }

        void end() throws FormatError {
            if (buf.hasRemaining()) {
                throw error("trailing_bytes", null);
            }
        }
    }
}
