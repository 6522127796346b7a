package dev.kvflux.serving.api;

import dev.kvflux.transfer.notify.LogText;
import java.net.InetSocketAddress;
import java.util.Objects;
import java.util.regex.Pattern;

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
