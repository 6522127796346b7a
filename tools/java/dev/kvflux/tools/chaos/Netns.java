package dev.kvflux.tools.chaos;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * Hosts as Linux network namespaces: each host a namespace of its own with one interface, {@code eth0}, joined by a
 * veth pair to a bridge that lives in a namespace of its own (the switch), so that nothing of the run touches the
 * machine's own namespace. Addresses are {@value #SUBNET}.N/24, host N in the order given; they exist only inside the
 * run's namespaces. Links are cut with blackhole routes inside the hosts (packets to the other side dropped as they
 * leave, established connections stall, new ones fail at once) and a host is isolated by taking its switch port down.
 * Needs root and iproute2's {@code ip}. Namespaces are named {@code kvf<pid>-<host>} after the process that made
 * them, so that a later run can remove those of a run that was killed before it could.
 */
public final class Netns implements AutoCloseable {
    /** The first three bytes of every host address. */
    static final String SUBNET = "10.77.0";
    private static final String SWITCH = "sw";

    private final String prefix;
    private final Map<String, String> addresses;
    private final boolean owner;

    private Netns(String prefix, List<String> hosts, boolean owner) {
        this.prefix = prefix;
        Map<String, String> map = new LinkedHashMap<>();
        for (int i = 0; i < hosts.size(); i++) {
            map.put(hosts.get(i), SUBNET + "." + (i + 1));
        }
        this.addresses = java.util.Collections.unmodifiableMap(map);
        this.owner = owner;
    }

    /** Why namespaces cannot be made here, or null when they can. */
    public static String unavailable() {
        if (!"root".equals(System.getProperty("user.name"))) {
            return "network namespaces need root (ip netns add); this runs as " + System.getProperty("user.name");
        }
        try {
            String probe = "kvf" + ProcessHandle.current().pid() + "-probe";
            run(List.of("ip", "netns", "add", probe));
            run(List.of("ip", "netns", "delete", probe));
            return null;
        } catch (IOException e) {
            return "network namespaces cannot be made here: " + e.getMessage();
        }
    }

    /**
     * Makes {@code hosts} (names of a few letters) and the switch joining them, after removing the namespaces of
     * earlier runs whose process is gone.
     */
    public static Netns create(List<String> hosts) throws IOException {
        sweep();
        Netns net = new Netns("kvf" + ProcessHandle.current().pid(), hosts, true);
        try {
            String sw = net.namespace(SWITCH);
            run(List.of("ip", "netns", "add", sw));
            run(List.of("ip", "-n", sw, "link", "add", "br0", "type", "bridge"));
            run(List.of("ip", "-n", sw, "link", "set", "br0", "up"));
            int i = 0;
            for (Map.Entry<String, String> host : net.addresses.entrySet()) {
                String ns = net.namespace(host.getKey());
                String port = "p" + (++i);
                run(List.of("ip", "netns", "add", ns));
                run(List.of("ip", "-n", sw, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns));
                run(List.of("ip", "-n", sw, "link", "set", port, "master", "br0", "up"));
                run(List.of("ip", "-n", ns, "addr", "add", host.getValue() + "/24", "dev", "eth0"));
                run(List.of("ip", "-n", ns, "link", "set", "eth0", "up"));
                run(List.of("ip", "-n", ns, "link", "set", "lo", "up"));
            }
        } catch (IOException | RuntimeException e) {
            net.close();
            throw e;
        }
        return net;
    }

    /** The hosts {@code create} made under {@code prefix}, from a process running inside one of them. */
    public static Netns attach(String prefix, List<String> hosts) {
        if (!prefix.matches("kvf[0-9]+")) {
            throw new IllegalArgumentException("not a kvflux namespace prefix: " + prefix);
        }
        return new Netns(prefix, hosts, false);
    }

    /** The prefix of this run's namespaces, {@code kvf<pid>}. */
    public String prefix() {
        return prefix;
    }

    /** Host names, in the order of their addresses. */
    public List<String> hosts() {
        return List.copyOf(addresses.keySet());
    }

    /** The namespace of {@code host}. */
    public String namespace(String host) {
        return prefix + "-" + host;
    }

    /** The address of {@code host}. */
    public String address(String host) {
        String address = addresses.get(host);
        if (address == null) {
            throw new IllegalArgumentException("no host " + host + " here; hosts are " + addresses.keySet());
        }
        return address;
    }

    /** The command prefix that runs a program on {@code host}: {@code ip netns exec NAMESPACE}. */
    public List<String> exec(String host) {
        address(host);
        return List.of("ip", "netns", "exec", namespace(host));
    }

    /** Packets from {@code from} to {@code to} are dropped as they leave {@code from}. */
    public void cutOneWay(String from, String to) throws IOException {
        run(List.of("ip", "-n", namespace(from), "route", "add", "blackhole", address(to) + "/32"));
    }

    /** Undoes {@link #cutOneWay}. */
    public void healOneWay(String from, String to) throws IOException {
        run(List.of("ip", "-n", namespace(from), "route", "del", "blackhole", address(to) + "/32"));
    }

    /** {@code a} and {@code b} can no longer reach each other, either way. */
    public void cut(String a, String b) throws IOException {
        cutOneWay(a, b);
        try {
            cutOneWay(b, a);
        } catch (IOException e) {
            healOneWay(a, b);
            throw e;
        }
    }

    /** Undoes {@link #cut}: each way, even when the other fails. */
    public void heal(String a, String b) throws IOException {
        try {
            healOneWay(a, b);
        } finally {
            healOneWay(b, a);
        }
    }

    /** {@code host}'s switch port down: it reaches no one and no one reaches it. */
    public void isolate(String host) throws IOException {
        run(List.of("ip", "-n", namespace(SWITCH), "link", "set", switchPort(host), "down"));
    }

    /** Undoes {@link #isolate}. */
    public void rejoin(String host) throws IOException {
        run(List.of("ip", "-n", namespace(SWITCH), "link", "set", switchPort(host), "up"));
    }

    private String switchPort(String host) {
        address(host);
        return "p" + (hosts().indexOf(host) + 1);
    }

    /**
     * Removes this run's namespaces (their interfaces go with them), killing any process still running in one. Does
     * nothing for an {@link #attach}ed view.
     */
    @Override
    public void close() {
        if (!owner) {
            return;
        }
        removeAll(prefix);
    }

    /** Removes the namespaces of earlier runs whose process is gone. */
    static void sweep() throws IOException {
        for (String name : list()) {
            java.util.regex.Matcher m = java.util.regex.Pattern.compile("kvf([0-9]+)-.*").matcher(name);
            if (m.matches() && ProcessHandle.of(Long.parseLong(m.group(1))).isEmpty()) {
                removeAll("kvf" + m.group(1));
            }
        }
    }

    /**
     * Kills every process still running in the namespaces of {@code prefix} (a run's role processes, if its harness
     * could not stop them), then removes the namespaces.
     */
    private static void removeAll(String prefix) {
        try {
            for (String name : list()) {
                if (name.startsWith(prefix + "-")) {
                    try {
                        for (String pid : run(List.of("ip", "netns", "pids", name)).split("\\s+")) {
                            if (pid.matches("[0-9]+")) {
                                ProcessHandle.of(Long.parseLong(pid)).ifPresent(ProcessHandle::destroyForcibly);
                            }
                        }
                    } catch (IOException e) {
                        // none to list
                    }
                    try {
                        run(List.of("ip", "netns", "delete", name));
                    } catch (IOException e) {
                        // gone meanwhile
                    }
                }
            }
        } catch (IOException e) {
            // no ip: nothing was made
        }
    }

    /** The names of the network namespaces now. */
    static List<String> list() throws IOException {
        List<String> names = new ArrayList<>();
        for (String line : run(List.of("ip", "netns", "list")).split("\n")) {
            String name = line.strip().split("\\s+")[0];
            if (!name.isEmpty()) {
                names.add(name);
            }
        }
        return names;
    }

    /** Runs {@code command}; its output, or an IOException with it when it fails. */
    static String run(List<String> command) throws IOException {
        Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
        String out;
        try {
            // ip prints a few lines at most, far less than a pipe holds: wait first, so that a hung ip times out
            if (!p.waitFor(30, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                throw new IOException(String.join(" ", command) + " did not end within 30 s");
            }
            out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IOException("interrupted: " + String.join(" ", command), e);
        }
        if (p.exitValue() != 0) {
            throw new IOException(String.join(" ", command) + " failed (exit " + p.exitValue() + "): " + out.strip());
        }
        return out;
    }
}
