package dev.kvflux.serving.api;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvflux.serving.http.HttpJson;
import dev.kvflux.transfer.notify.LogText;
import java.nio.charset.StandardCharsets;
import java.util.Objects;

/**
 * An instance's membership record in etcd, the etcd form of a registration: it lives at
 * {@code /kvflux/<cluster>/instances/<role>/<incarnation>}, put with the instance's lease so that etcd deletes it when
 * the instance stops keeping the lease alive.
 *
 * <p>Its value is JSON, {@code {"record": "<body>", "ts": <ms>, "signature": "<hex>"}}, where the body is itself
 * JSON text, {@code {"cluster", "role", "http", "notify", "incarnation", "lease"}}: a registration's fields, the
 * cluster's name and the id of the lease it is put with. With a notify secret, {@code ts} and {@code signature} are
 * {@link RegistrationAuth#signRecord} over the body's exact bytes; without one they are left out. A reader accepts a
 * record only when the body's role and incarnation are those of its key, its cluster is the reader's and its lease is
 * the one etcd holds it with, so a signed record can be moved neither to another key nor to another lease.
 *
 * @param lease the id of the lease the record is put with
 */
public record MemberRecord(String cluster, Instance instance, long incarnation, long lease) {
    /** The largest value read: a record is a few short strings and numbers. */
    public static final int MAX_BYTES = 4096;
    /** The longest key read; a record's key is far shorter. */
    public static final int MAX_KEY_BYTES = 256;

    public MemberRecord {
        Objects.requireNonNull(cluster, "cluster");
        Objects.requireNonNull(instance, "instance");
        if (incarnation <= 0) {
            throw new IllegalArgumentException("a member record needs a positive incarnation, got " + incarnation);
        }
    }

    /** The prefix every record of {@code cluster} is under: {@code /kvflux/<cluster>/instances/}. */
    public static String prefix(String cluster) {
        return "/kvflux/" + cluster + "/instances/";
    }

    /** The record's key: {@code /kvflux/<cluster>/instances/<role>/<incarnation>}. */
    public String key() {
        return prefix(cluster) + instance.role().wireName() + "/" + incarnation;
    }

    /** This record at {@code lease}. */
    public MemberRecord withLease(long lease) {
        return new MemberRecord(cluster, instance, incarnation, lease);
    }

    /** The record's value, signed now with {@code signer} unless it is {@code null}. */
    public byte[] encode(RegistrationAuth signer) {
        ObjectNode body = HttpJson.MAPPER.createObjectNode().put("cluster", cluster).put("role", instance.role().wireName())
                .put("http", Instance.hostPort(instance.httpAddress()))
                .put("notify", Instance.hostPort(instance.notifyAddress()))
                .put("incarnation", incarnation).put("lease", lease);
        instance.putRanks(body);
        String text = HttpJson.write(body);
        ObjectNode value = HttpJson.MAPPER.createObjectNode().put("record", text);
        if (signer != null) {
            RegistrationAuth.Signature signature = signer.signRecord(text.getBytes(StandardCharsets.UTF_8));
            value.put("ts", signature.signedAtMillis()).put("signature", signature.hex());
        }
        return HttpJson.write(value).getBytes(StandardCharsets.UTF_8);
    }

    /** A record read and accepted, with its signing time ({@link Long#MIN_VALUE} when unsigned or not checked). */
    public record Accepted(MemberRecord record, long signedAtMillis) {
    }

    /**
     * The record at {@code key} whose value is {@code value}, as etcd holds it with lease {@code lease}, checked for a
     * reader of {@code cluster}: the key's layout, the value's size and shape, the body's agreement with the key, the
     * cluster and the lease, and, when {@code auth} is not {@code null}, its signature (and the signing time's
     * freshness when {@code requireFresh}: a record just put is signed just before).
     *
     * @throws RefusedException with the reason ({@code malformed_key}, {@code oversized}, {@code malformed},
     *     {@code mismatch}, {@code unsigned}, {@code bad_signature}, {@code stale}) and a message saying what was wrong
     */
    public static Accepted read(String cluster, String key, byte[] value, long lease, RegistrationAuth auth,
            boolean requireFresh) {
        String prefix = prefix(cluster);
        if (key.length() > MAX_KEY_BYTES || !key.startsWith(prefix)) {
            throw new RefusedException("malformed_key", "key '" + LogText.escape(key) + "' is not " + prefix
                    + "<role>/<incarnation>");
        }
        String[] parts = key.substring(prefix.length()).split("/", -1);
        Role role;
        long incarnation;
        try {
            if (parts.length != 2) {
                throw new IllegalArgumentException("not <role>/<incarnation>");
            }
            role = Role.of(parts[0]);
            incarnation = Long.parseLong(parts[1]);
            if (incarnation <= 0 || !parts[1].equals(Long.toString(incarnation))) {
                throw new IllegalArgumentException("the incarnation is not a positive integer");
            }
        } catch (IllegalArgumentException e) {
            throw new RefusedException("malformed_key", "key '" + LogText.escape(key) + "' is not " + prefix
                    + "<role>/<incarnation>: " + e.getMessage());
        }
        if (value.length > MAX_BYTES) {
            throw new RefusedException("oversized", "record " + LogText.escape(key) + " is " + value.length
                    + " bytes, over the " + MAX_BYTES + " read");
        }
        JsonNode envelope = parse(value, key);
        JsonNode text = envelope.get("record");
        if (text == null || !text.isTextual()) {
            throw new RefusedException("malformed", "record " + LogText.escape(key) + " has no \"record\" text");
        }
        byte[] bodyBytes = text.textValue().getBytes(StandardCharsets.UTF_8);
        JsonNode body = parse(bodyBytes, key);
        MemberRecord record;
        try {
            java.net.InetSocketAddress notify = Instance.address(text(body, "notify"));
            record = new MemberRecord(text(body, "cluster"), new Instance(Role.of(text(body, "role")),
                    Instance.address(text(body, "http")), notify, Instance.ranks(body, "notify_ranks", notify)),
                    number(body, "incarnation"), number(body, "lease"));
        } catch (IllegalArgumentException e) {
            throw new RefusedException("malformed", "record " + LogText.escape(key) + ": " + e.getMessage());
        }
        if (!record.cluster().equals(cluster) || record.instance().role() != role || record.incarnation() != incarnation
                || record.lease() != lease) {
            throw new RefusedException("mismatch", "record " + LogText.escape(key) + " names cluster "
                    + LogText.escape(record.cluster()) + ", " + record.instance().role().wireName() + " incarnation "
                    + record.incarnation() + " and lease " + record.lease() + ", not its key's and etcd's (lease "
                    + lease + "): a record copied from elsewhere");
        }
        if (auth == null) {
            return new Accepted(record, Long.MIN_VALUE);
        }
        JsonNode ts = envelope.get("ts");
        JsonNode signature = envelope.get("signature");
        if (ts == null || signature == null) {
            throw new RefusedException("unsigned", "record " + LogText.escape(key) + " is not signed and this proxy has"
                    + " a notify secret; give the instance the same notify.secret (or KVFLUX_NOTIFY_SECRET)");
        }
        if (!ts.isIntegralNumber() || !ts.canConvertToLong() || !signature.isTextual()) {
            throw new RefusedException("bad_signature", "record " + LogText.escape(key) + "'s \"ts\" or \"signature\""
                    + " is malformed");
        }
        RegistrationAuth.Signature signed = new RegistrationAuth.Signature(ts.asLong(), signature.textValue());
        try {
            auth.verifyRecord(signed, bodyBytes);
        } catch (RegistrationAuth.RefusedException e) {
            throw new RefusedException("bad_signature", "record " + LogText.escape(key) + ": " + e.getMessage());
        }
        if (requireFresh) {
            try {
                auth.checkFresh(signed.signedAtMillis());
            } catch (RegistrationAuth.RefusedException e) {
                throw new RefusedException("stale", "record " + LogText.escape(key) + " was put just now, but "
                        + e.getMessage());
            }
        }
        return new Accepted(record, signed.signedAtMillis());
    }

    private static JsonNode parse(byte[] bytes, String key) {
        try {
            JsonNode node = HttpJson.MAPPER.readTree(bytes);
            if (node != null && node.isObject()) {
                return node;
            }
        } catch (JsonProcessingException e) {
            // reported below
        } catch (java.io.IOException e) {
            // reported below
        }
        throw new RefusedException("malformed", "record " + LogText.escape(key) + " is not a JSON object");
    }

    private static String text(JsonNode json, String field) {
        JsonNode value = json.get(field);
        if (value == null || !value.isTextual()) {
            throw new IllegalArgumentException("\"" + field + "\" must be a string");
        }
        return value.textValue();
    }

    private static long number(JsonNode json, String field) {
        JsonNode value = json.get(field);
        if (value == null || !value.isIntegralNumber() || !value.canConvertToLong()) {
            throw new IllegalArgumentException("\"" + field + "\" must be an integer");
        }
        return value.asLong();
    }

    /** A record refused; {@link #reason()} is one of a fixed few, for a counter's tag. */
    public static final class RefusedException extends RuntimeException {
        private final String reason;

        public RefusedException(String reason, String message) {
            super(message, null, false, false);
            this.reason = reason;
        }

        public String reason() {
            return reason;
        }
    }
}
