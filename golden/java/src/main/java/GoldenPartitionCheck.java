import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.apache.kafka.common.utils.Utils;

/**
 * Checks golden/partitions.json against Apache Kafka's own partitioning code: for every row,
 * {@code Utils.murmur2} of the role's UTF-8 bytes, {@code Utils.toPositive} of that hash, and
 * {@code toPositive(murmur2) % count} for every listed partition count (the rule of Kafka's
 * keyed partitioning). Exits 1 on any difference, 2 on an unreadable file, 0 when all agree.
 */
public final class GoldenPartitionCheck {
    private GoldenPartitionCheck() {}

    public static void main(String[] args) throws IOException {
        if (args.length != 1) {
            System.err.println("usage: GoldenPartitionCheck <path to golden/partitions.json>");
            System.exit(2);
        }
        JsonNode root = new ObjectMapper().readTree(new File(args[0]));
        if (root.path("schema_version").asInt(-1) != 1) {
            System.err.println("partitions.json: expected schema_version 1, got " + root.get("schema_version"));
            System.exit(2);
        }
        JsonNode vectors = root.path("vectors");
        if (!vectors.isArray() || vectors.isEmpty()) {
            System.err.println("partitions.json: no vectors");
            System.exit(2);
        }

        int roles = 0;
        int partitionRows = 0;
        List<String> failures = new ArrayList<>();
        for (JsonNode v : vectors) {
            String name = v.path("name").asText();
            byte[] role = expand(v.get("role")).getBytes(StandardCharsets.UTF_8);
            int hash = Utils.murmur2(role);
            int positive = Utils.toPositive(hash);
            roles++;
            check(failures, name + ": murmur2", v.get("murmur2").longValue(), hash);
            check(failures, name + ": to_positive", v.get("to_positive").longValue(), positive);
            JsonNode rows = v.path("partitions");
            if (!rows.isArray() || rows.isEmpty()) {
                failures.add(name + ": no partition rows");
            }
            for (JsonNode row : rows) {
                int count = Math.toIntExact(row.get("count").longValue());
                long want = row.get("partition").longValue();
                check(failures, name + ": count " + count, want, positive % count);
                partitionRows++;
            }
        }

        for (String f : failures) {
            System.err.println("MISMATCH " + f);
        }
        System.out.printf(
                "golden partitions: %d roles (murmur2 and toPositive), %d partition rows; %d disagreed%n",
                roles, partitionRows, failures.size());
        if (!failures.isEmpty()) {
            System.exit(1);
        }
        System.out.printf("partitions: %d passed, 0 failed%n", roles + partitionRows);
    }

    private static void check(List<String> failures, String what, long want, long got) {
        if (want != got) {
            failures.add(what + ": file says " + want + ", Kafka computes " + got);
        }
    }

    /**
     * A text value of the golden files: a string, {"repeat": s, "count": n} (s repeated n times),
     * or an array of those two forms, concatenated. See golden/README.md.
     */
    static String expand(JsonNode node) {
        if (node == null) {
            throw new IllegalArgumentException("missing text value");
        }
        if (node.isTextual()) {
            return node.textValue();
        }
        if (node.isObject()) {
            return node.get("repeat").textValue().repeat(node.get("count").intValue());
        }
        if (node.isArray()) {
            StringBuilder sb = new StringBuilder();
            for (JsonNode piece : node) {
                if (piece.isArray()) {
                    throw new IllegalArgumentException("nested arrays are not a text value");
                }
                sb.append(expand(piece));
            }
            return sb.toString();
        }
        throw new IllegalArgumentException("not a text value: " + node);
    }
}
