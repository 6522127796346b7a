package dev.kvflux.transfer.notify;

import java.net.InetSocketAddress;

/**
 * Peer-controlled text made safe for one log line: control characters (newlines included) and
 * backslashes escaped, and cut to a bounded length, so a peer can neither forge log lines nor flood them.
 */
public final class LogText {
    /** The most characters of peer text kept in one log field. */
    public static final int MAX_CHARS = 200;
    private static final char[] HEX = "0123456789abcdef".toCharArray();

    private LogText() {
    }

    /** {@code host:port} of an address as it was given (no lookup): {@code 10.0.0.7:11357}. */
    public static String hostPort(InetSocketAddress address) {
        return address.getHostString() + ":" + address.getPort();
    }

    /** {@code text} escaped and cut to {@value #MAX_CHARS} characters; "null" for null. */
    public static String escape(String text) {
        if (text == null) {
            return "null";
        }
        int limit = Math.min(text.length(), MAX_CHARS);
        StringBuilder out = new StringBuilder(limit + 16);
        for (int i = 0; i < limit; i++) {
            char c = text.charAt(i);
            switch (c) {
                case '\n' -> out.append("\\n");
                case '\r' -> out.append("\\r");
                case '\t' -> out.append("\\t");
                case '\\' -> out.append("\\\\");
                default -> {
                    if (c < 0x20 || c == 0x7F || (c >= 0x80 && c < 0xA0) || c == 0x2028 || c == 0x2029) {
                        out.append("\\u").append(HEX[c >> 12 & 0xF]).append(HEX[c >> 8 & 0xF]).append(HEX[c >> 4 & 0xF])
                                .append(HEX[c & 0xF]);
                    } else {
                        out.append(c);
                    }
                }
            }
        }
        if (text.length() > limit) {
            out.append("...(").append(text.length() - limit).append(" more chars)");
        }
        return out.toString();
    }
}
