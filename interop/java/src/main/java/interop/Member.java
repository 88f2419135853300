package interop;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * A minimal member of the coordination protocol for one role, on Apache Kafka's Java client.
 *
 * <p>It registers (a plain producer, the record pinned to the role's partition), reads the
 * role's partition read_committed up to the last stable offset, builds the roster and the
 * lease, challenges at the deadline plus its rank's staggers (with no lease: counted from when
 * it first saw none), mints the epoch with a transactional producer ({@code transactional.id =
 * role}, {@code transaction.timeout.ms = lease}), learns the minted pair with
 * DescribeTransactions, and writes and renews the lease in transactions. A refused write ends
 * its term (exit 3). It never changes another member's records.
 *
 * <p>Events go to stdout, one line each, flushed; diagnostics go to stderr. Exit codes: 0
 * resigned, 2 usage, 3 fenced, 4 any other failure.
 */
public final class Member {
    private static final String USAGE = String.join("\n",
            "usage: interop.Member --bootstrap HOST:PORT --role ROLE --member ID [options]",
            "  --partitions N          the state topic's real partition count (default 16)",
            "  --topic NAME            the state topic (default __coordination_state)",
            "  --lease-ms MS           lease duration (default 2000)",
            "  --renew-ms MS           renew interval (default 500)",
            "  --stagger-ms MS         challenge stagger (default 300)",
            "  --compression C         none|gzip|snappy|lz4|zstd (default: the client's default, not set)",
            "  --resign-after-ms MS    resign this long after start (default: never)",
            "  A line 'resign' on stdin resigns too.");

    // ---- options ----
    private String bootstrap;
    private String role;
    private String member;
    private String topic = "__coordination_state";
    private int partitions = 16;
    private long leaseMs = 2000;
    private long renewMs = 500;
    private long staggerMs = 300;
    private String compression;
    private long resignAfterMs = -1;

    // ---- clients ----
    private KafkaProducer<byte[], byte[]> plain;
    private KafkaProducer<byte[], byte[]> txn;
    private KafkaConsumer<byte[], byte[]> reader;
    private Admin admin;
    private TopicPartition tp;

    // ---- the role's state, as read ----
    /** Member to the offset of its latest registration. */
    private final Map<String, Long> roster = new HashMap<>();
    private Codec.Lease lease;
    private long noLeaseSince = -1;
    private long malformed;

    // ---- this member ----
    private long ownOffset = -1;
    private boolean sawSelf;
    private String lastStandby = "";
    private volatile boolean resignRequested;
    private boolean leading;
    private long producerId;
    private short producerEpoch;
    private long grantedAt;
    private long nextRenewal;
    private long renewals;
    private boolean commitPending;

    public static void main(String[] args) {
        Member m = new Member();
        try {
            m.parse(args);
        } catch (IllegalArgumentException e) {
            System.err.println("interop.Member: " + e.getMessage());
            System.err.println(USAGE);
            System.exit(2);
        }
        int code;
        try {
            code = m.run();
        } catch (Fenced f) {
            event("FENCED during=" + f.during + " error=" + oneWord(f.getCause()));
            code = 3;
        } catch (Exception e) {
            e.printStackTrace();
            event("FAILED error=" + oneWord(e));
            code = 4;
        }
        m.close();
        System.exit(code);
    }

    private void parse(String[] args) {
        for (int i = 0; i < args.length; i++) {
            String flag = args[i];
            if (flag.equals("-h") || flag.equals("--help")) {
                System.out.println(USAGE);
                System.exit(0);
            }
            if (i + 1 >= args.length) {
                throw new IllegalArgumentException(flag + " needs a value");
            }
            String v = args[++i];
            switch (flag) {
                case "--bootstrap" -> bootstrap = v;
                case "--role" -> role = v;
                case "--member" -> member = v;
                case "--topic" -> topic = v;
                case "--partitions" -> partitions = Integer.parseInt(v);
                case "--lease-ms" -> leaseMs = Long.parseLong(v);
                case "--renew-ms" -> renewMs = Long.parseLong(v);
                case "--stagger-ms" -> staggerMs = Long.parseLong(v);
                case "--compression" -> {
                    if (!List.of("none", "gzip", "snappy", "lz4", "zstd").contains(v)) {
                        throw new IllegalArgumentException("--compression must be none|gzip|snappy|lz4|zstd, got " + v);
                    }
                    compression = v;
                }
                case "--resign-after-ms" -> resignAfterMs = Long.parseLong(v);
                default -> throw new IllegalArgumentException("unknown option " + flag);
            }
        }
        if (bootstrap == null || role == null || member == null) {
            throw new IllegalArgumentException("--bootstrap, --role and --member are required");
        }
        if (role.isEmpty() || member.isEmpty()) {
            throw new IllegalArgumentException("the role and the member id must not be empty");
        }
        if (partitions <= 0 || leaseMs <= 0 || renewMs <= 0 || renewMs >= leaseMs || staggerMs < 0) {
            throw new IllegalArgumentException("need partitions > 0 and 0 < renew-ms < lease-ms, stagger-ms >= 0");
        }
    }

    // ---- the life of the member -----------------------------------------------------------------

    private int run() throws Exception {
        long start = System.currentTimeMillis();
        int partition = Codec.rolePartition(role, partitions);
        tp = new TopicPartition(topic, partition);
        openClients();
        checkPartitionCount();
        startStdinReader();

        // Register: a plain producer, the record pinned to the role's partition.
        Codec.Registration reg = new Codec.Registration(member, System.currentTimeMillis());
        RecordMetadata md = plain.send(new ProducerRecord<>(topic, partition,
                Codec.encodeKey(Codec.Key.registration(role, member)), Codec.encodeRegistration(reg)))
                .get(30, TimeUnit.SECONDS);
        ownOffset = md.offset();
        event("REGISTERED offset=" + ownOffset + " partition=" + partition);

        reader.assign(List.of(tp));
        reader.seekToBeginning(List.of(tp));

        while (true) {
            long now = System.currentTimeMillis();
            if (resignRequested || (resignAfterMs >= 0 && now - start >= resignAfterMs)) {
                return resign();
            }
            if (leading) {
                if (now >= nextRenewal) {
                    renew();
                    continue;
                }
                // Keep reading while leading (a short poll doubles as the wait).
                read(Math.max(1, Math.min(100, nextRenewal - now)));
                continue;
            }
            read(100);
            // Ask where the stable records end, then read up to there: every record stable
            // when the question left is applied before this member looks at its turn. The end
            // is fixed by the question, so the catch-up ends even while other transactions on
            // the partition keep committing (a member that chased the latest end instead could
            // chase it forever behind a leader renewing often). The instant counts from the
            // question, not the answer: a process paused in between reads a stale answer on
            // waking.
            long askedAt = System.currentTimeMillis();
            long end = reader.endOffsets(List.of(tp), Duration.ofSeconds(30)).get(tp);
            while (reader.position(tp) < end) {
                read(100);
            }
            standBy(askedAt);
        }
    }

    /** Reads what the partition holds past the position, up to the last stable offset. */
    private void read(long waitMs) {
        for (ConsumerRecord<byte[], byte[]> r : reader.poll(Duration.ofMillis(waitMs))) {
            apply(r.offset(), r.key(), r.value());
        }
    }

    /** One record into the roster and the lease; other roles' records and malformed ones are skipped. */
    private void apply(long offset, byte[] keyBytes, byte[] value) {
        if (keyBytes == null) {
            malformed++;
            return;
        }
        Codec.Key key;
        try {
            key = Codec.decodeKey(keyBytes);
        } catch (Codec.FormatError e) {
            malformed++;
            return;
        }
        if (!key.role().equals(role)) {
            return;
        }
        boolean tombstone = value == null || value.length == 0;
        try {
            if (key.isLease()) {
                if (tombstone) {
                    lease = null;
                } else {
                    lease = Codec.decodeLease(value);
                }
            } else if (tombstone) {
                roster.remove(key.member());
            } else {
                Codec.decodeRegistration(value);
                roster.put(key.member(), offset);
            }
        } catch (Codec.FormatError e) {
            malformed++;
            System.err.println("skipped a malformed record at offset " + offset + ": " + e.getMessage());
        }
    }

    /** A standby's step after a read that reached the last stable offset. */
    private void standBy(long askedAt) throws Exception {
        long now = System.currentTimeMillis();
        if (lease == null) {
            if (noLeaseSince < 0) {
                noLeaseSince = now;
            }
        } else {
            noLeaseSince = -1;
        }
        Long mine = roster.get(member);
        if (mine == null || mine != ownOffset) {
            if (!sawSelf) {
                return; // our registration is not readable yet
            }
            report("NOT_ON_ROSTER (deregistered by another member; this member does not register again)");
            return;
        }
        sawSelf = true;
        String holder = lease == null ? null : lease.member();
        int rank = 0;
        for (Map.Entry<String, Long> e : roster.entrySet()) {
            if (!e.getKey().equals(member) && !e.getKey().equals(holder) && e.getValue() < mine) {
                rank++;
            }
        }
        long base = lease == null ? noLeaseSince : lease.deadline();
        long turn = base + rank * staggerMs;
        report("STANDBY rank=" + rank + " holder=" + (holder == null ? "-" : holder)
                + " members=" + roster.size());
        // Challenge only on a read asked for at or after the turn (the lease it shows had run
        // out by then). A read asked for earlier is followed by another: the holder may have
        // renewed meanwhile, or the member was paused between the question and now.
        if (now >= turn && askedAt >= turn) {
            challenge();
        }
    }

    private void report(String line) {
        if (!line.equals(lastStandby)) {
            lastStandby = line;
            event(line);
        }
    }

    // ---- challenge, lead, resign ----------------------------------------------------------------

    private void challenge() throws Exception {
        event("CHALLENGING holder=" + (lease == null ? "-" : lease.member()));
        if (txn == null) {
            Properties p = common();
            p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, role);
            p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, (int) leaseMs);
            p.put(ProducerConfig.ACKS_CONFIG, "all");
            p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
            p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
            if (compression != null) {
                p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, compression);
            }
            txn = new KafkaProducer<>(p);
        }
        try {
            txn.initTransactions();
        } catch (RuntimeException e) {
            if (fenced(e)) {
                throw new Fenced("init", e);
            }
            throw e;
        }
        // kafka-clients exposes no getter for the pair it was granted: ask the coordinator.
        TransactionDescription d = admin.describeTransactions(List.of(role)).description(role)
                .get(30, TimeUnit.SECONDS);
        producerId = d.producerId();
        producerEpoch = (short) d.producerEpoch();
        event("ACQUIRED producerId=" + producerId + " epoch=" + producerEpoch + " state=" + d.state());
        grantedAt = System.currentTimeMillis();
        long deadline = writeLease("claim");
        leading = true;
        event("ELECTED producerId=" + producerId + " epoch=" + producerEpoch + " deadline=" + deadline);
    }

    private void renew() throws Exception {
        long deadline = writeLease("renewal");
        renewals++;
        event("RENEWED n=" + renewals + " deadline=" + deadline);
    }

    /**
     * A lease record in a transaction of the role's producer: the guarded write. Every lease of
     * a term carries the pair minted at initTransactions (on transaction version 2 the client
     * moves its epoch at each commit; the record keeps the term's pair). Returns the deadline.
     */
    private long writeLease(String during) throws Exception {
        long now = System.currentTimeMillis();
        long deadline = now + leaseMs;
        Codec.Lease l = new Codec.Lease(member, producerId, producerEpoch, grantedAt, deadline);
        try {
            inTransaction(Codec.encodeKey(Codec.Key.lease(role)), Codec.encodeLease(l));
            nextRenewal = now + renewMs;
            return deadline;
        } catch (Fenced f) {
            throw new Fenced(during, f.getCause());
        } catch (RuntimeException e) {
            // Not a fence: try again soon (a leader does not end its term on anything else).
            System.err.println("lease " + during + " failed, retrying: " + e);
            event("WRITE_FAILED during=" + during + " error=" + oneWord(e));
            nextRenewal = System.currentTimeMillis() + Math.min(renewMs, 200);
            if ("claim".equals(during)) {
                throw e;
            }
            return l.deadline();
        }
    }

    private void inTransaction(byte[] key, byte[] value) throws Exception {
        try {
            if (commitPending) {
                // The last commit timed out with its outcome unknown: finish it (never abort it).
                txn.commitTransaction();
                commitPending = false;
            }
            txn.beginTransaction();
            txn.send(new ProducerRecord<>(topic, tp.partition(), key, value)).get(30, TimeUnit.SECONDS);
            txn.commitTransaction();
        } catch (Exception e) {
            if (fenced(e)) {
                throw new Fenced("write", e);
            }
            if (e instanceof TimeoutException) {
                commitPending = true; // the commit is retried as is before the next write
                throw e;
            }
            try {
                txn.abortTransaction();
            } catch (RuntimeException a) {
                if (fenced(a)) {
                    throw new Fenced("abort", a);
                }
                throw a;
            }
            throw e instanceof RuntimeException re ? re : new RuntimeException(e);
        }
    }

    private int resign() throws Exception {
        int code = 0;
        if (leading) {
            try {
                inTransaction(Codec.encodeKey(Codec.Key.lease(role)), null);
                event("LEASE_CLEARED");
            } catch (Fenced f) {
                event("FENCED during=resign error=" + oneWord(f.getCause()));
                code = 3;
            }
            leading = false;
        }
        plain.send(new ProducerRecord<>(topic, tp.partition(),
                Codec.encodeKey(Codec.Key.registration(role, member)), null)).get(30, TimeUnit.SECONDS);
        event("RESIGNED");
        return code;
    }

    // ---- clients --------------------------------------------------------------------------------

    private Properties common() {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("client.id", "interop-java-" + member);
        return p;
    }

    private void openClients() {
        Properties p = common();
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        if (compression != null) {
            p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, compression);
        }
        plain = new KafkaProducer<>(p);

        Properties c = common();
        c.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        reader = new KafkaConsumer<>(c);

        Properties a = new Properties();
        a.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        a.put(AdminClientConfig.CLIENT_ID_CONFIG, "interop-java-admin-" + member);
        admin = Admin.create(a);
    }

    /** Every member passes the topic's real partition count: refuse another. */
    private void checkPartitionCount() {
        List<PartitionInfo> info = reader.partitionsFor(topic, Duration.ofSeconds(30));
        if (info == null || info.isEmpty()) {
            throw new IllegalStateException("the state topic " + topic + " does not exist");
        }
        if (info.size() != partitions) {
            throw new IllegalStateException("the state topic " + topic + " has " + info.size()
                    + " partitions, not --partitions " + partitions);
        }
    }

    private void startStdinReader() {
        Thread t = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = in.readLine()) != null) {
                    if (line.trim().equals("resign")) {
                        resignRequested = true;
                    }
                }
            } catch (Exception e) {
                // stdin closed or unreadable: only --resign-after-ms resigns then
            }
        }, "stdin");
        t.setDaemon(true);
        t.start();
    }

    private void close() {
        List<AutoCloseable> all = new ArrayList<>();
        if (txn != null) {
            all.add(() -> txn.close(Duration.ofSeconds(5)));
        }
        if (plain != null) {
            all.add(() -> plain.close(Duration.ofSeconds(5)));
        }
        if (reader != null) {
            all.add(() -> reader.close(Duration.ofSeconds(5)));
        }
        if (admin != null) {
            all.add(() -> admin.close(Duration.ofSeconds(5)));
        }
        for (AutoCloseable c : all) {
            try {
                c.close();
            } catch (Exception e) {
                System.err.println("close: " + e);
            }
        }
    }

    // ---- helpers --------------------------------------------------------------------------------

    /** The broker refused a write of a superseded epoch (PRODUCER_FENCED or INVALID_PRODUCER_EPOCH). */
    static boolean fenced(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof ProducerFencedException || t instanceof InvalidProducerEpochException) {
                return true;
            }
            if (t.getCause() == t) {
                break;
            }
        }
        return false;
    }

    private static final class Fenced extends Exception {
        private static final long serialVersionUID = 1L;
        final String during;

        Fenced(String during, Throwable cause) {
            super(cause);
            this.during = during;
        }
    }

    private static String oneWord(Throwable e) {
        if (e == null) {
            return "-";
        }
        Throwable root = e;
        while (root.getCause() != null && root.getCause() != root) {
            root = root.getCause();
        }
        return e.getClass().getSimpleName()
                + (root != e ? "/" + root.getClass().getSimpleName() : "");
    }

    static synchronized void event(String line) {
        System.out.println(line);
        System.out.flush();
    }
}
