package interop;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.Objects;

/**
 * Asserts every vector in golden/*.json (keys, registrations, leases, malformed, partitions,
 * tokens) with the Java member's own codec ({@link Codec}), in both directions as
 * golden/README.md describes. Exits 1 on any mismatch, 2 on a missing or unreadable file,
 * 0 when every vector agrees.
 */
public final class GoldenCheck {
    private GoldenCheck() {}

    private static final List<String> FAILURES = new ArrayList<>();

    public static void main(String[] args) throws IOException {
        if (args.length != 1) {
            System.err.println("usage: GoldenCheck <golden dir>");
            System.exit(2);
        }
        File dir = new File(args[0]);
        int total = 0;
        total += each(dir, "keys", GoldenCheck::key);
        total += each(dir, "registrations", GoldenCheck::registration);
        total += each(dir, "leases", GoldenCheck::lease);
        total += each(dir, "malformed", GoldenCheck::malformed);
        total += each(dir, "partitions", GoldenCheck::partitions);
        total += each(dir, "tokens", GoldenCheck::tokens);
        for (String f : FAILURES) {
            System.err.println("MISMATCH " + f);
        }
        System.out.printf("java member golden vectors: %d asserted, %d failed%n", total, FAILURES.size());
        System.exit(FAILURES.isEmpty() && total > 0 ? 0 : 1);
    }

    interface Check {
        void run(String name, JsonNode v);
    }

    private static int each(File dir, String file, Check check) throws IOException {
        File f = new File(dir, file + ".json");
        if (!f.isFile()) {
            System.err.println("missing " + f);
            System.exit(2);
        }
        JsonNode root = new ObjectMapper().readTree(f);
        if (root.path("schema_version").asInt(-1) != 1) {
            System.err.println(f + ": schema_version is not 1");
            System.exit(2);
        }
        JsonNode vectors = root.path("vectors");
        if (!vectors.isArray() || vectors.isEmpty()) {
            System.err.println(f + ": no vectors");
            System.exit(2);
        }
        int n = 0;
        for (JsonNode v : vectors) {
            String name = file + ": " + v.path("name").asText();
            try {
                check.run(name, v);
            } catch (RuntimeException e) {
                FAILURES.add(name + ": " + e);
            }
            n++;
        }
        System.out.printf("  %-14s %5d vectors%n", file, n);
        return n;
    }

    private static void expect(String what, Object want, Object got) {
        if (!Objects.equals(want, got)) {
            FAILURES.add(what + ": want " + shorten(want) + ", got " + shorten(got));
        }
    }

    private static String shorten(Object o) {
        String s = String.valueOf(o);
        return s.length() > 120 ? s.substring(0, 120) + "...(" + s.length() + " chars)" : s;
    }

    private static void expectBytes(String what, byte[] want, byte[] got) {
        if (!Arrays.equals(want, got)) {
            HexFormat h = HexFormat.of();
            FAILURES.add(what + ": want " + shorten(h.formatHex(want)) + ", got " + shorten(h.formatHex(got)));
        }
    }

    /** A text or hex value: a string, {"repeat": s, "count": n}, or an array of those, joined. */
    static String expand(JsonNode node) {
        if (node.isTextual()) {
            return node.textValue();
        }
        if (node.isObject()) {
            return node.get("repeat").textValue().repeat(Math.toIntExact(node.get("count").longValue()));
        }
        if (node.isArray()) {
            StringBuilder sb = new StringBuilder();
            for (JsonNode part : node) {
                if (part.isArray()) {
                    throw new IllegalArgumentException("nested array in a compact value");
                }
                sb.append(expand(part));
            }
            return sb.toString();
        }
        throw new IllegalArgumentException("not a text or hex value: " + node);
    }

    static byte[] hex(JsonNode node) {
        return HexFormat.of().parseHex(expand(node));
    }

    static long i64(JsonNode node) {
        if (!node.isIntegralNumber() || !node.canConvertToLong()) {
            throw new IllegalArgumentException("not an i64: " + node);
        }
        return node.longValue();
    }

    static short i16(JsonNode node) {
        long v = i64(node);
        if (v < Short.MIN_VALUE || v > Short.MAX_VALUE) {
            throw new IllegalArgumentException("not an i16: " + node);
        }
        return (short) v;
    }

    private static void key(String name, JsonNode v) {
        String kind = v.get("kind").textValue();
        String role = expand(v.get("role"));
        String member = expand(v.get("member"));
        Codec.Key key = switch (kind) {
            case "registration" -> Codec.Key.registration(role, member);
            case "lease" -> Codec.Key.lease(role);
            default -> throw new IllegalArgumentException("unknown kind " + kind);
        };
        byte[] bytes = hex(v.get("hex"));
        expectBytes(name + ": encode", bytes, Codec.encodeKey(key));
        try {
            expect(name + ": decode", key, Codec.decodeKey(bytes));
        } catch (Codec.FormatError e) {
            FAILURES.add(name + ": decode failed: " + e.getMessage());
        }
    }

    private static void registration(String name, JsonNode v) {
        Codec.Registration r = new Codec.Registration(expand(v.get("member")), i64(v.get("registered_at")));
        byte[] bytes = hex(v.get("hex"));
        expectBytes(name + ": encode", bytes, Codec.encodeRegistration(r));
        try {
            expect(name + ": decode", r, Codec.decodeRegistration(bytes));
        } catch (Codec.FormatError e) {
            FAILURES.add(name + ": decode failed: " + e.getMessage());
        }
    }

    private static void lease(String name, JsonNode v) {
        Codec.Lease l = new Codec.Lease(
                expand(v.get("member")),
                i64(v.get("producer_id")),
                i16(v.get("producer_epoch")),
                i64(v.get("granted_at")),
                i64(v.get("deadline")));
        byte[] bytes = hex(v.get("hex"));
        expectBytes(name + ": encode", bytes, Codec.encodeLease(l));
        try {
            expect(name + ": decode", l, Codec.decodeLease(bytes));
        } catch (Codec.FormatError e) {
            FAILURES.add(name + ": decode failed: " + e.getMessage());
        }
    }

    private static void malformed(String name, JsonNode v) {
        String part = v.get("part").textValue();
        byte[] bytes = hex(v.get("hex"));
        String kind = v.get("kind").textValue();
        String field = v.get("field").isNull() ? null : v.get("field").textValue();
        try {
            Object decoded = switch (part) {
                case Codec.PART_KEY -> Codec.decodeKey(bytes);
                case Codec.PART_REGISTRATION -> Codec.decodeRegistration(bytes);
                case Codec.PART_LEASE -> Codec.decodeLease(bytes);
                default -> throw new IllegalArgumentException("unknown part " + part);
            };
            FAILURES.add(name + ": decoded as " + shorten(decoded) + ", want " + kind);
        } catch (Codec.FormatError e) {
            expect(name + ": part", part, e.part);
            expect(name + ": kind", kind, e.kind);
            expect(name + ": field", field, e.field);
        }
    }

    private static void partitions(String name, JsonNode v) {
        byte[] role = expand(v.get("role")).getBytes(StandardCharsets.UTF_8);
        int hash = org.apache.kafka.common.utils.Utils.murmur2(role);
        expect(name + ": murmur2", i64(v.get("murmur2")), (long) hash);
        expect(name + ": to_positive", i64(v.get("to_positive")), (long) (hash & 0x7fffffff));
        JsonNode rows = v.get("partitions");
        if (!rows.isArray() || rows.isEmpty()) {
            FAILURES.add(name + ": no partition rows");
        }
        for (JsonNode row : rows) {
            int count = Math.toIntExact(i64(row.get("count")));
            long want = i64(row.get("partition"));
            expect(name + ": count " + count + " (bytes)", want, (long) Codec.partitionOfBytes(role, count));
            if (role.length > 0) {
                expect(name + ": count " + count + " (role)", want,
                        (long) Codec.rolePartition(expand(v.get("role")), count));
            }
        }
    }

    private static Codec.Token token(JsonNode t) {
        return new Codec.Token(i64(t.get("producer_id")), i16(t.get("producer_epoch")));
    }

    private static void tokens(String name, JsonNode v) {
        Codec.Token a = token(v.get("a"));
        Codec.Token b = token(v.get("b"));
        long order = i64(v.get("order"));
        expect(name + ": compare(a, b)", order, (long) Integer.signum(Codec.Token.compare(a, b)));
        expect(name + ": compare(b, a)", -order, (long) Integer.signum(Codec.Token.compare(b, a)));
        expect(name + ": a == b", order == 0, a.equals(b));
    }
}
