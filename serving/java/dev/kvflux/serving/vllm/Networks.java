package dev.kvflux.serving.vllm;

import dev.kvflux.transfer.notify.LogText;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.ArrayList;
import java.util.List;

/**
 * A list of networks, {@code ADDRESS/PREFIX} each (IPv4 or IPv6; a bare address is one host), that what comes unsigned
 * from vLLM's side (ZeroMQ registrations, requests from vLLM's proxy) must come from: neither carries anything that
 * could be authenticated. {@link #LOOPBACK} by default. Immutable.
 */
public final class Networks {
    /** This host only: 127.0.0.0/8 and ::1. */
    public static final Networks LOOPBACK = parse("127.0.0.0/8,::1/128");

    private record Net(byte[] address, int prefix) {
    }

    private final List<Net> nets;
    private final String text;

    private Networks(List<Net> nets, String text) {
        this.nets = List.copyOf(nets);
        this.text = text;
    }

    /**
     * The networks in {@code list}, comma-separated.
     *
     * @throws IllegalArgumentException naming the first entry that is not {@code ADDRESS[/PREFIX]} with a numeric
     *     address
     */
    public static Networks parse(String list) {
        List<Net> nets = new ArrayList<>();
        for (String entry : list.split(",")) {
            String item = entry.strip();
            if (item.isEmpty()) {
                continue;
            }
            int slash = item.indexOf('/');
            String address = slash < 0 ? item : item.substring(0, slash);
            if (!address.matches("[0-9.]+|[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*")) {
                throw new IllegalArgumentException("network '" + LogText.escape(item) + "' is not ADDRESS/PREFIX with"
                        + " a numeric address, e.g. 10.0.0.0/8 or 127.0.0.1");
            }
            byte[] bytes;
            try {
                bytes = InetAddress.getByName(address).getAddress();
            } catch (UnknownHostException e) {
                throw new IllegalArgumentException("network '" + LogText.escape(item) + "' has no valid address");
            }
            int prefix;
            try {
                prefix = slash < 0 ? bytes.length * 8 : Integer.parseInt(item.substring(slash + 1));
            } catch (NumberFormatException e) {
                prefix = -1;
            }
            if (prefix < 0 || prefix > bytes.length * 8) {
                throw new IllegalArgumentException("network '" + LogText.escape(item) + "' has a prefix outside 0.."
                        + bytes.length * 8);
            }
            nets.add(new Net(bytes, prefix));
        }
        if (nets.isEmpty()) {
            throw new IllegalArgumentException("give at least one network, e.g. 127.0.0.1/32");
        }
        return new Networks(nets, list.strip());
    }

    /** Whether {@code address} is in one of the networks. */
    public boolean contains(InetAddress address) {
        byte[] bytes = address.getAddress();
        for (Net net : nets) {
            if (net.address().length == bytes.length && matches(net, bytes)) {
                return true;
            }
        }
        return false;
    }

    /** Whether the address written {@code address} (numeric) is in one of the networks; false if it is not numeric. */
    public boolean contains(String address) {
        String bare = address.startsWith("[") && address.endsWith("]") ? address.substring(1, address.length() - 1)
                : address;
        if (!bare.matches("[0-9.]+|[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*")) {
            return false;
        }
        try {
            return contains(InetAddress.getByName(bare));
        } catch (UnknownHostException e) {
            return false;
        }
    }

    private static boolean matches(Net net, byte[] bytes) {
        int whole = net.prefix() / 8;
        for (int i = 0; i < whole; i++) {
            if (net.address()[i] != bytes[i]) {
                return false;
            }
        }
        int rest = net.prefix() % 8;
        if (rest == 0) {
            return true;
        }
        int mask = 0xFF << (8 - rest) & 0xFF;
        return (net.address()[whole] & mask) == (bytes[whole] & mask);
    }

    @Override
    public String toString() {
        return text;
    }
}
