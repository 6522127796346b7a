package dev.kvflux.transfer.notify;

import java.net.BindException;
import java.net.UnknownHostException;
import java.util.Locale;

/** The words for a server port that could not be bound, shared by every kvflux server. */
public final class BindFailures {
    private BindFailures() {
    }

    /**
     * Why {@code host:port} could not be bound, in words a user can act on: the port is in use, binding
     * it needs privileges, the address is not one of this host's, the host name is unknown, or the port is
     * out of range; else the error's own message.
     */
    public static String describe(String host, int port, Throwable error) {
        if (port < 0 || port > 65535) {
            return "port " + port + " is out of range; use 1 to 65535, or 0 for any free port";
        }
        for (Throwable e = error; e != null; e = e.getCause() == e ? null : e.getCause()) {
            String message = String.valueOf(e.getMessage()).toLowerCase(Locale.ROOT);
            if (message.contains("address already in use")) {
                return "port " + port + " on " + host + " is in use by another process; stop it or pick another port";
            }
            if (message.contains("permission denied") || message.contains("access denied")) {
                return "binding port " + port + " needs privileges this process lacks (ports under 1024 usually"
                        + " need root); pick a port from 1024 up";
            }
            if (message.contains("cannot assign requested address") || message.contains("address not available")) {
                return "address " + host + " is not one of this host's addresses; bind 127.0.0.1, 0.0.0.0 or an"
                        + " address of one of its interfaces";
            }
            if (e instanceof UnknownHostException || message.contains("unresolved")
                    || message.contains("name or service not known")) {
                return "host " + host + " cannot be resolved; give an IP address or a known host name";
            }
            if (message.contains("port out of range")) {
                return "port " + port + " is out of range; use 1 to 65535, or 0 for any free port";
            }
            if (e instanceof BindException) {
                return e.getMessage();
            }
        }
        return String.valueOf(error.getMessage());
    }
}
