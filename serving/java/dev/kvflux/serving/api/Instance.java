package dev.kvflux.serving.api;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvflux.transfer.TpRanks;
import dev.kvflux.transfer.notify.LogText;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.net.InetSocketAddress;
import java.util.Objects;
import java.util.regex.Pattern;

/**
 * A serving instance as it registers with the proxy: its role, its HTTP address, its notify address and, for an
 * instance of several tensor-parallel ranks, every rank's notify address ({@code notify_ranks}, rank 0's first: the
 * notify address).
 */
public record Instance(Role role, InetSocketAddress httpAddress, InetSocketAddress notifyAddress,
        List<InetSocketAddress> notifyRanks) {
    /**
     * @throws IllegalArgumentException if the ranks are not a power of two in 1..{@value TpRanks#MAX_TP} of distinct
     *     addresses, rank 0's the notify address
     */
    public Instance {
        Objects.requireNonNull(role, "role");
        Objects.requireNonNull(httpAddress, "httpAddress");
        Objects.requireNonNull(notifyAddress, "notifyAddress");
        notifyRanks = List.copyOf(notifyRanks);
        TpRanks.check(role.wireName(), notifyRanks.size());
        if (!notifyRanks.getFirst().equals(notifyAddress)) {
            throw new IllegalArgumentException("notify_ranks must start with rank 0's notify address, the instance's"
                    + " notify address " + hostPort(notifyAddress));
        }
        if (new HashSet<>(notifyRanks).size() != notifyRanks.size()) {
            throw new IllegalArgumentException("notify_ranks names one address twice; every rank has its own");
        }
    }

    /** An instance of one rank. */
    public Instance(Role role, InetSocketAddress httpAddress, InetSocketAddress notifyAddress) {
        this(role, httpAddress, notifyAddress, List.of(Objects.requireNonNull(notifyAddress, "notifyAddress")));
    }

    /** How many tensor-parallel ranks the instance runs. */
    public int tp() {
        return notifyRanks.size();
    }

    /** Writes {@code notify_ranks} into {@code json} when the instance has more than one rank. */
    public ObjectNode putRanks(ObjectNode json) {
        if (notifyRanks.size() > 1) {
            ArrayNode ranks = json.putArray("notify_ranks");
            notifyRanks.forEach(a -> ranks.add(hostPort(a)));
        }
        return json;
    }

    /**
     * The ranks' notify addresses in {@code json}'s {@code key} (an array of {@code host:port}), or just
     * {@code notify} when it has none.
     *
     * @throws IllegalArgumentException saying what is wrong, counting the entries before reading them
     */
    public static List<InetSocketAddress> ranks(JsonNode json, String key, InetSocketAddress notify) {
        JsonNode ranks = json.get(key);
        if (ranks == null) {
            return List.of(notify);
        }
        if (!ranks.isArray() || ranks.size() < 1 || ranks.size() > TpRanks.MAX_TP) {
            throw new IllegalArgumentException("\"" + key + "\" must be an array of 1.." + TpRanks.MAX_TP
                    + " \"host:port\" notify addresses, one per rank");
        }
        List<InetSocketAddress> addresses = new ArrayList<>(ranks.size());
        for (JsonNode rank : ranks) {
            if (!rank.isTextual()) {
                throw new IllegalArgumentException("\"" + key + "\" must hold \"host:port\" strings");
            }
            addresses.add(address(rank.asText()));
        }
        return addresses;
    }

    /** {@code http://host:port}, the base of the instance's HTTP API. */
    public String baseUrl() {
        return "http://" + httpAddress.getHostString() + ":" + httpAddress.getPort();
    }

    /** A host name, an IPv4 address or a bracketed IPv6 address: nothing that could break a URL or a log line. */
    private static final Pattern HOST = Pattern.compile("[A-Za-z0-9.-]{1,253}|\\[[0-9A-Fa-f:.]{2,45}]");

    /**
     * {@code host:port} parsed into an address. The host must be a host name, an IPv4 address or an IPv6
     * address in brackets; a peer's text never reaches a URL or a log line otherwise.
     *
     * @throws IllegalArgumentException saying what was expected (quoting the input escaped and cut, as {@link LogText} does)
     */
    public static InetSocketAddress address(String hostPort) {
        Objects.requireNonNull(hostPort, "hostPort");
        int colon = hostPort.lastIndexOf(':');
        if (colon <= 0 || colon == hostPort.length() - 1 || !HOST.matcher(hostPort.substring(0, colon)).matches()) {
            throw new IllegalArgumentException("address '" + LogText.escape(hostPort) + "' is not host:port with a host name"
                    + " or IP address, e.g. 127.0.0.1:8100");
        }
        int port;
        try {
            port = Integer.parseInt(hostPort.substring(colon + 1));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("address '" + LogText.escape(hostPort) + "' has no numeric port, e.g. 127.0.0.1:8100");
        }
        if (port < 1 || port > 65535) {
            throw new IllegalArgumentException("address '" + LogText.escape(hostPort) + "' has port " + port + ", outside 1..65535");
        }
        return InetSocketAddress.createUnresolved(hostPort.substring(0, colon), port);
    }

    /** {@code host:port} of an address. */
    public static String hostPort(InetSocketAddress address) {
        return LogText.hostPort(address);
    }
}
