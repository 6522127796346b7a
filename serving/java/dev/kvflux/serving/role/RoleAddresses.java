package dev.kvflux.serving.role;

import java.util.Objects;

/**
 * Where a serving role listens: the host it binds and advertises, its HTTP port and its notify port
 * (0 picks a free port).
 */
public record RoleAddresses(String host, int httpPort, int notifyPort) {
    public RoleAddresses {
        Objects.requireNonNull(host, "host");
        checkPort("HTTP", httpPort);
        checkPort("notify", notifyPort);
    }

    /** Both ports picked free on loopback: for tests and the in-process benchmark. */
    public static RoleAddresses loopback() {
        return new RoleAddresses("127.0.0.1", 0, 0);
    }

    private static void checkPort(String which, int port) {
        if (port < 0 || port > 65535) {
            throw new IllegalArgumentException(which + " port " + port + " is not a TCP port (0..65535)");
        }
    }
}
