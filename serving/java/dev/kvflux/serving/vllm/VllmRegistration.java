package dev.kvflux.serving.vllm;

import dev.kvflux.serving.api.Instance;
import dev.kvflux.serving.api.Role;
import dev.kvflux.transfer.KvMode;
import dev.kvflux.transfer.notify.LogText;
import java.net.InetSocketAddress;
import java.net.URI;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;

/**
 * One instance's registration as vLLM's MoRIIO deployments send it to a proxy's discovery port: its role, its HTTP
 * address, its ZeroMQ address ({@code host:IP,handshake:PORT,notify:PORT}, the base ports of its ranks), its
 * data-parallel and tensor-parallel sizes and its transfer mode. Two shapes exist and both are read
 * ({@link #from}):
 *
 * <ul>
 *   <li>vLLM's connector: {@code {"type": "P"|"D", "http_address": "ip:port", "zmq_address": "host:...",
 *       "dp_size", "tp_size", "transfer_mode": "READ"|"WRITE"}};</li>
 *   <li>vllm-project/router's (and vLLM's older proxy's): {@code {"type": "register"|"HELLO", "role": "P"|"D",
 *       "request_address": "http://ip:port/v1/completions", "handshake_port", "notify_port", "dp_size",
 *       "tp_size", "transfer_mode"}}, whose ZeroMQ address is made from the request address's host and the two
 *       ports.</li>
 * </ul>
 *
 * @param role prefill ({@code P}) or decode ({@code D})
 * @param http where it serves its OpenAI API, {@code host:port}
 * @param zmqAddress its ZeroMQ address, as the request ids the proxy makes embed it
 * @param zmqHost the ZeroMQ address's host
 * @param handshakePort its handshake base port
 * @param notifyPort its notify base port (rank 0's)
 * @param dpSize its data-parallel ranks, 1 or more
 * @param tpSize its tensor-parallel ranks, 1 or more
 * @param mode its transfer mode
 */
public record VllmRegistration(Role role, InetSocketAddress http, String zmqAddress, String zmqHost,
                               int handshakePort, int notifyPort, int dpSize, int tpSize, KvMode mode) {
    /** The most data-parallel or tensor-parallel ranks a registration may name. */
    public static final int MAX_RANKS = 1024;
    /** The longest string value a registration may hold. */
    static final int MAX_TEXT_CHARS = 256;

    public VllmRegistration {
        Objects.requireNonNull(role, "role");
        Objects.requireNonNull(http, "http");
        Objects.requireNonNull(zmqAddress, "zmqAddress");
        Objects.requireNonNull(mode, "mode");
    }

    /**
     * The registration in {@code fields}, a decoded msgpack map.
     *
     * @throws IllegalArgumentException saying what is missing or wrong; a {@code HELLO} without a role is not a
     *     registration either (vLLM's proxy takes it as a greeting)
     */
    public static VllmRegistration from(Map<String, Object> fields) {
        String type = text(fields, "type");
        return switch (type) {
            case "P", "D" -> connector(type, fields);
            case "register", "HELLO" -> router(fields);
            default -> throw new IllegalArgumentException("registration type " + LogText.escape(type) + " is neither"
                    + " P, D, register nor HELLO");
        };
    }

    private static VllmRegistration connector(String type, Map<String, Object> fields) {
        String zmq = text(fields, "zmq_address");
        String[] parts = zmqParts(zmq);
        return new VllmRegistration(role(type), Instance.address(text(fields, "http_address")), zmq, parts[0],
                port(parts[1], "zmq_address's handshake"), port(parts[2], "zmq_address's notify"),
                ranks(fields, "dp_size"), ranks(fields, "tp_size"), mode(fields));
    }

    private static VllmRegistration router(Map<String, Object> fields) {
        Role role = role(text(fields, "role"));
        URI request = URI.create(text(fields, "request_address"));
        if (request.getHost() == null || request.getPort() < 1) {
            throw new IllegalArgumentException("request_address must be http://host:port/..., got "
                    + LogText.escape(request.toString()));
        }
        int handshake = port(fields.get("handshake_port"), "handshake_port");
        int notify = port(fields.get("notify_port"), "notify_port");
        String host = request.getHost();
        InetSocketAddress http = Instance.address(host + ":" + request.getPort());
        return new VllmRegistration(role, http, "host:" + host + ",handshake:" + handshake + ",notify:" + notify, host,
                handshake, notify, ranks(fields, "dp_size"), ranks(fields, "tp_size"), mode(fields));
    }

    /** {@code host}, {@code handshake} and {@code notify} of a ZeroMQ address, each split at its first colon. */
    static String[] zmqParts(String zmq) {
        String host = null;
        String handshake = null;
        String notify = null;
        for (String segment : zmq.split(",", 8)) {
            int colon = segment.indexOf(':');
            if (colon < 0) {
                continue;
            }
            String key = segment.substring(0, colon).strip();
            String value = segment.substring(colon + 1).strip();
            switch (key) {
                case "host" -> host = value;
                case "handshake" -> handshake = value;
                case "notify" -> notify = value;
                default -> { }
            }
        }
        if (host == null || host.isEmpty() || handshake == null || notify == null) {
            throw new IllegalArgumentException("zmq_address must be host:IP,handshake:PORT,notify:PORT, got "
                    + LogText.escape(zmq));
        }
        Instance.address(host.contains(":") && !host.startsWith("[") ? "[" + host + "]:1" : host + ":1");
        return new String[] {host, handshake, notify};
    }

    private static Role role(String type) {
        return switch (type) {
            case "P" -> Role.PREFILL;
            case "D" -> Role.DECODE;
            default -> throw new IllegalArgumentException("role must be P or D, got " + LogText.escape(type));
        };
    }

    private static KvMode mode(Map<String, Object> fields) {
        String mode = text(fields, "transfer_mode");
        return switch (mode.toUpperCase(Locale.ROOT)) {
            case "WRITE" -> KvMode.WRITE;
            case "READ" -> KvMode.READ;
            default -> throw new IllegalArgumentException("transfer_mode must be READ or WRITE, got "
                    + LogText.escape(mode));
        };
    }

    private static String text(Map<String, Object> fields, String key) {
        Object value = fields.get(key);
        if (!(value instanceof String text)) {
            throw new IllegalArgumentException("registration needs \"" + key + "\" as a string");
        }
        if (text.length() > MAX_TEXT_CHARS) {
            throw new IllegalArgumentException("registration's \"" + key + "\" is over " + MAX_TEXT_CHARS
                    + " characters");
        }
        return text;
    }

    private static int ranks(Map<String, Object> fields, String key) {
        Object value = fields.get(key);
        if (!(value instanceof Long n) || n < 1 || n > MAX_RANKS) {
            throw new IllegalArgumentException("registration needs \"" + key + "\" as an integer from 1 to "
                    + MAX_RANKS);
        }
        return n.intValue();
    }

    private static int port(Object value, String what) {
        long port;
        if (value instanceof Long n) {
            port = n;
        } else if (value instanceof String text) {
            try {
                port = Long.parseLong(text.strip());
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException(what + " port must be a number, got " + LogText.escape(text));
            }
        } else {
            throw new IllegalArgumentException("registration needs " + what + " port as a number");
        }
        if (port < 1 || port > 65535) {
            throw new IllegalArgumentException(what + " port must be from 1 to 65535, got " + port);
        }
        return (int) port;
    }

    /** This instance's HTTP address as {@code host:port}. */
    public String httpHostPort() {
        return Instance.hostPort(http);
    }

    @Override
    public String toString() {
        return (role == Role.PREFILL ? "P" : "D") + " http=" + httpHostPort() + " zmq=" + zmqAddress + " dp="
                + dpSize + " tp=" + tpSize + " " + mode.wireName().toUpperCase(Locale.ROOT);
    }
}
