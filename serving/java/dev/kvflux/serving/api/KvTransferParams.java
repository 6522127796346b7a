package dev.kvflux.serving.api;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvflux.transfer.TpRanks;
import java.util.List;
import dev.kvflux.transfer.notify.NotifyCodec;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.Objects;

/**
 * What the proxy adds to each request as {@code kv_transfer_params}: the transfer id, which side this
 * instance is ({@code do_remote_decode} on prefill, {@code do_remote_prefill} on decode), the peer's notify address
 * ({@code remote_notify}, {@code host:port}) and, when the peer runs several tensor-parallel ranks, every rank's
 * ({@code remote_notify_ranks}, rank 0's first).
 */
public record KvTransferParams(String transferId, Role peerRole, List<InetSocketAddress> remoteNotifyRanks) {
    public KvTransferParams {
        Objects.requireNonNull(transferId, "transferId");
        Objects.requireNonNull(peerRole, "peerRole");
        remoteNotifyRanks = List.copyOf(remoteNotifyRanks);
        TpRanks.check(peerRole.wireName(), remoteNotifyRanks.size());
    }

    /** Params naming a peer of one rank. */
    public KvTransferParams(String transferId, Role peerRole, InetSocketAddress remoteNotify) {
        this(transferId, peerRole, List.of(Objects.requireNonNull(remoteNotify, "remoteNotify")));
    }

    /** The peer's notify address: its rank 0's. */
    public InetSocketAddress remoteNotify() {
        return remoteNotifyRanks.getFirst();
    }

    /** Writes the params into {@code request} under {@code kv_transfer_params}. */
    public ObjectNode into(ObjectNode request) {
        ObjectNode params = request.putObject("kv_transfer_params");
        params.put("transfer_id", transferId);
        params.put("do_remote_decode", peerRole == Role.DECODE);
        params.put("do_remote_prefill", peerRole == Role.PREFILL);
        params.put("remote_notify", Instance.hostPort(remoteNotify()));
        if (remoteNotifyRanks.size() > 1) {
            ArrayNode ranks = params.putArray("remote_notify_ranks");
            remoteNotifyRanks.forEach(a -> ranks.add(Instance.hostPort(a)));
        }
        return request;
    }

    /**
     * The params of a request that an instance of {@code self} received.
     *
     * @throws IllegalArgumentException saying what is missing, if the request did not come through a proxy
     */
    public static KvTransferParams from(JsonNode request, Role self) {
        JsonNode params = request.get("kv_transfer_params");
        if (params == null || !params.isObject()) {
            throw new IllegalArgumentException("request has no kv_transfer_params object; send requests to the"
                    + " proxy (kvflux proxy), which adds them, not to a " + self.wireName() + " instance directly");
        }
        JsonNode id = params.get("transfer_id");
        JsonNode notify = params.get("remote_notify");
        if (id == null || !id.isTextual() || id.asText().isEmpty()) {
            throw new IllegalArgumentException("kv_transfer_params.transfer_id must be a non-empty string");
        }
        // every notice about this transfer carries the id; one over the codec's limit would be refused by the
        // peer on every retry, each time closing a notify connection that other transfers share
        int idBytes = id.asText().getBytes(StandardCharsets.UTF_8).length;
        if (idBytes > NotifyCodec.MAX_ID_BYTES) {
            throw new IllegalArgumentException("kv_transfer_params.transfer_id is " + idBytes + " bytes; at most "
                    + NotifyCodec.MAX_ID_BYTES + " fit in a notification");
        }
        if (notify == null || !notify.isTextual()) {
            throw new IllegalArgumentException("kv_transfer_params.remote_notify must be \"host:port\" of the "
                    + (self == Role.PREFILL ? "decode" : "prefill") + " instance's notify channel");
        }
        InetSocketAddress remote = Instance.address(notify.asText());
        List<InetSocketAddress> ranks = Instance.ranks(params, "remote_notify_ranks", remote);
        if (!ranks.getFirst().equals(remote)) {
            throw new IllegalArgumentException("kv_transfer_params.remote_notify_ranks must start with remote_notify,"
                    + " the peer's rank 0");
        }
        Role peer = self == Role.PREFILL ? Role.DECODE : Role.PREFILL;
        try {
            return new KvTransferParams(id.asText(), peer, ranks);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("kv_transfer_params.remote_notify_ranks: " + e.getMessage());
        }
    }
}
