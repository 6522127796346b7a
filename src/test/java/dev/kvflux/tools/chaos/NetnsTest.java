package dev.kvflux.tools.chaos;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

/**
 * Hosts as network namespaces, as {@code kvflux chaos --hosts netns} uses them: a TCP connection from one host to
 * another's address, refused by a cut link either way or one way, by an isolated host, and back after each heal; every
 * namespace gone after close, and a dead run's swept. Needs root (CI runs as root).
 */
class NetnsTest {
    private static final String PYTHON = "/usr/bin/python3";

    /** Whether {@code from} opens a TCP connection to {@code to}'s port 7000 within 2 s. */
    private static boolean connects(Netns net, String from, String to) throws Exception {
        List<String> command = new java.util.ArrayList<>(net.exec(from));
        command.addAll(List.of(PYTHON, "-c", "import socket; socket.create_connection(('" + net.address(to)
                + "', 7000), timeout=2).close()"));
        Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
        p.getInputStream().readAllBytes();
        assertThat(p.waitFor(20, TimeUnit.SECONDS)).isTrue();
        return p.exitValue() == 0;
    }

    @Test
    void linksCutEitherWayOrOneWayAndIsolatedHostsHealAndNothingIsLeftBehind() throws Exception {
        String why = Netns.unavailable();
        Assumptions.assumeTrue(why == null, () -> "no network namespaces here: " + why);
        Assumptions.assumeTrue(Files.isExecutable(Path.of(PYTHON)), "no " + PYTHON);
        Process[] listeners = new Process[2];
        String prefix;
        try (Netns net = Netns.create(List.of("a", "b"))) {
            prefix = net.prefix();
            assertThat(net.address("a")).isEqualTo("10.77.0.1");
            assertThat(Netns.list()).contains(prefix + "-a", prefix + "-b", prefix + "-sw");
            for (int i = 0; i < 2; i++) {
                List<String> command = new java.util.ArrayList<>(net.exec(i == 0 ? "a" : "b"));
                command.addAll(List.of(PYTHON, "-c", "import socket\ns = socket.socket()\n"
                        + "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\ns.bind(('0.0.0.0', 7000))\n"
                        + "s.listen(16)\nwhile True:\n    s.accept()[0].close()\n"));
                listeners[i] = new ProcessBuilder(command).redirectErrorStream(true).start();
            }
            long until = System.nanoTime() + 20_000_000_000L;
            while (!(connects(net, "b", "a") && connects(net, "a", "b")) && System.nanoTime() < until) {
                Thread.sleep(100);
            }
            assertThat(connects(net, "b", "a")).as("joined by the switch").isTrue();

            net.cut("a", "b");
            assertThat(connects(net, "b", "a")).as("cut both ways, b to a").isFalse();
            assertThat(connects(net, "a", "b")).as("cut both ways, a to b").isFalse();
            net.heal("a", "b");
            assertThat(connects(net, "b", "a")).as("healed").isTrue();

            net.cutOneWay("a", "b");
            assertThat(connects(net, "a", "b")).as("a's packets to b are dropped").isFalse();
            net.healOneWay("a", "b");
            assertThat(connects(net, "a", "b")).isTrue();

            net.isolate("b");
            assertThat(connects(net, "a", "b")).as("b isolated").isFalse();
            net.rejoin("b");
            until = System.nanoTime() + 10_000_000_000L;
            while (!connects(net, "a", "b") && System.nanoTime() < until) {
                Thread.sleep(100);
            }
            assertThat(connects(net, "a", "b")).as("b back on the switch").isTrue();
        } finally {
            for (Process listener : listeners) {
                if (listener != null) {
                    listener.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
                }
            }
        }
        assertThat(Netns.list()).noneMatch(n -> n.startsWith(prefix + "-"));
    }

    @Test
    void theNamespacesOfARunWhoseProcessIsGoneAreSwept() throws Exception {
        String why = Netns.unavailable();
        Assumptions.assumeTrue(why == null, () -> "no network namespaces here: " + why);
        Process gone = new ProcessBuilder("true").start();
        gone.waitFor();
        String stale = "kvf" + gone.pid() + "-x";
        Netns.run(List.of("ip", "netns", "add", stale));
        try {
            Netns.sweep();

            assertThat(Netns.list()).doesNotContain(stale);
        } finally {
            if (Netns.list().contains(stale)) {
                Netns.run(List.of("ip", "netns", "delete", stale));
            }
        }
    }
}
