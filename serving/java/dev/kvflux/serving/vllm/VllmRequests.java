package dev.kvflux.serving.vllm;

import com.fasterxml.jackson.databind.JsonNode;
import dev.kvflux.serving.api.Instance;
import dev.kvflux.serving.api.KvTransferParams;
import dev.kvflux.serving.api.Role;
import dev.kvflux.transfer.TpRanks;
import dev.kvflux.transfer.notify.LogText;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;

/**
 * Requests in the shape vLLM's MoRIIO proxy sends them, as kvflux's roles take them when they run behind it
 * ({@code --vllm-proxy}): the transfer id is {@code kv_transfer_params.transfer_id}, and the peer's notify address is
 * in the request id ({@code X-Request-Id}: {@code ___prefill_addr_{zmq}___decode_addr_{zmq}_{hex}}, each ZeroMQ
 * address {@code host:IP,handshake:PORT,notify:PORT}), or else in {@code remote_host} and {@code remote_notify_port};
 * the peer's ranks listen on that notify port plus their rank, {@code remote_tp_size} of them.
 */
public final class VllmRequests {
    private static final String PREFILL_MARK = "___prefill_addr_";
    private static final String DECODE_MARK = "___decode_addr_";

    private VllmRequests() {
    }

    /** Whether {@code request}'s {@code kv_transfer_params} are vLLM's (they name no kvflux {@code remote_notify}). */
    public static boolean vllmShaped(JsonNode request) {
        JsonNode params = request.path("kv_transfer_params");
        return params.isObject() && !params.has("remote_notify")
                && (params.has("do_remote_decode") || params.has("do_remote_prefill"));
    }

    /**
     * The transfer an instance of {@code self} is asked for by a vLLM-shaped request with request id {@code requestId}
     * (null when there is none).
     *
     * @throws IllegalArgumentException saying what is missing or malformed
     */
    public static KvTransferParams params(JsonNode request, Role self, String requestId) {
        JsonNode params = request.path("kv_transfer_params");
        JsonNode id = params.path("transfer_id");
        if (!id.isTextual() || id.asText().isEmpty()) {
            throw new IllegalArgumentException("kv_transfer_params.transfer_id must be a non-empty string");
        }
        Role peer = self == Role.PREFILL ? Role.DECODE : Role.PREFILL;
        InetSocketAddress notify = peerNotify(params, peer, requestId);
        int tp = params.path("remote_tp_size").asInt(1);
        TpRanks.check("remote_tp_size", tp);
        List<InetSocketAddress> ranks = new ArrayList<>(tp);
        for (int r = 0; r < tp; r++) {
            if (notify.getPort() + r > 65535) {
                throw new IllegalArgumentException("the peer's notify port " + notify.getPort() + " and its " + tp
                        + " ranks go past 65535");
            }
            ranks.add(InetSocketAddress.createUnresolved(notify.getHostString(), notify.getPort() + r));
        }
        return new KvTransferParams(id.asText(), peer, ranks);
    }

    private static InetSocketAddress peerNotify(JsonNode params, Role peer, String requestId) {
        if (requestId != null) {
            String zmq = peerZmq(requestId, peer);
            if (zmq != null) {
                String[] parts = VllmRegistration.zmqParts(zmq);
                return Instance.address(hostPort(parts[0], parts[2]));
            }
        }
        JsonNode host = params.path("remote_host");
        JsonNode port = params.path("remote_notify_port");
        if (host.isTextual() && port.canConvertToInt()) {
            return Instance.address(hostPort(host.asText(), port.asText()));
        }
        throw new IllegalArgumentException("the request names no " + peer.wireName() + " notify address: neither its"
                + " X-Request-Id (___prefill_addr_..___decode_addr_..) nor kv_transfer_params.remote_host and"
                + " remote_notify_port");
    }

    /** The peer's ZeroMQ address in a vLLM request id, or null when the id embeds none. */
    static String peerZmq(String requestId, Role peer) {
        int p = requestId.indexOf(PREFILL_MARK);
        int d = requestId.indexOf(DECODE_MARK);
        if (p < 0 || d < p) {
            return null;
        }
        if (peer == Role.PREFILL) {
            return requestId.substring(p + PREFILL_MARK.length(), d);
        }
        String rest = requestId.substring(d + DECODE_MARK.length());
        int end = rest.lastIndexOf('_');
        if (end < 0) {
            throw new IllegalArgumentException("request id " + LogText.escape(requestId) + " has no _<hex> after its"
                    + " decode address");
        }
        return rest.substring(0, end);
    }

    private static String hostPort(String host, String port) {
        return (host.contains(":") && !host.startsWith("[") ? "[" + host + "]" : host) + ":" + port.strip();
    }
}
