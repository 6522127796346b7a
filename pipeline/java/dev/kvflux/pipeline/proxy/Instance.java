package dev.kvflux.pipeline.proxy;

import java.net.InetSocketAddress;
import java.util.Objects;

/** A serving instance as it registers with the proxy: its role, its HTTP address and its notify address. */
public record Instance(Role role, InetSocketAddress httpAddress, InetSocketAddress notifyAddress) {
    public Instance {
        Objects.requireNonNull(role, "role");
        Objects.requireNonNull(httpAddress, "httpAddress");
        Objects.requireNonNull(notifyAddress, "notifyAddress");
    }

    /** {@code http://host:port}, the base of the instance's HTTP API. */
    public String baseUrl() {
        return "http://" + httpAddress.getHostString() + ":" + httpAddress.getPort();
    }

    /**
     * {@code host:port} parsed into an address.
     *
     * @throws IllegalArgumentException saying what was expected
     */
    public static InetSocketAddress address(String hostPort) {
        Objects.requireNonNull(hostPort, "hostPort");
        int colon = hostPort.lastIndexOf(':');
        if (colon <= 0 || colon == hostPort.length() - 1) {
            throw new IllegalArgumentException("address '" + hostPort + "' is not host:port, e.g. 127.0.0.1:8100");
        }
        int port;
        try {
            port = Integer.parseInt(hostPort.substring(colon + 1));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("address '" + hostPort + "' has no numeric port, e.g. 127.0.0.1:8100");
        }
        if (port < 1 || port > 65535) {
            throw new IllegalArgumentException("address '" + hostPort + "' has port " + port + ", outside 1..65535");
        }
        return InetSocketAddress.createUnresolved(hostPort.substring(0, colon), port);
    }

    /** {@code host:port} of an address. */
    public static String hostPort(InetSocketAddress address) {
        return address.getHostString() + ":" + address.getPort();
    }
}
