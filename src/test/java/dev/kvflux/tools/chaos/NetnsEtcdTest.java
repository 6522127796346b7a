package dev.kvflux.tools.chaos;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import dev.kvflux.serving.http.HttpJson;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Three etcd members each on a host of its own, as {@code kvflux chaos --hosts netns} runs them for the faults across
 * etcd: they form one cluster, the two members cut from the leader elect another, all three agree on one leader again
 * after the heal, and nothing is left behind. Needs root and etcd (CI has both); no bound on how long any of it takes.
 */
class NetnsEtcdTest {
    private static final Duration WITHIN = Duration.ofSeconds(60);
    private static final String PYTHON = "/usr/bin/python3";

    @Test
    void membersOnHostsOfTheirOwnElectAnotherLeaderWhenTheirsIsCutOffAndAgreeAgainAfterTheHeal(@TempDir Path dir)
            throws Exception {
        String why = Netns.unavailable();
        Assumptions.assumeTrue(why == null, () -> "no network namespaces here: " + why);
        Assumptions.assumeTrue(Files.isExecutable(Path.of("/usr/bin/etcd")) || System.getenv(EtcdProcess.ENV) != null,
                "no etcd here");
        Assumptions.assumeTrue(Files.isExecutable(Path.of(PYTHON)), "no " + PYTHON);
        List<String> names = NetnsEtcdCluster.MEMBERS;
        String prefix;
        List<EtcdProcess> members = new ArrayList<>();
        try (Netns net = Netns.create(names)) {
            prefix = net.prefix();
            String initial = names.stream().map(m -> EtcdProcess.peerUrl(m, net.address(m)))
                    .collect(Collectors.joining(","));
            try {
                for (String m : names) {
                    members.add(EtcdProcess.member(dir.resolve(m), m, net.address(m), net.exec(m), initial));
                    members.getLast().launch();
                }
                EtcdCluster.await("the members agree on a leader", WITHIN, () -> agreed(net, names) != null);
                String leaderId = agreed(net, names);
                String leader = names.stream().filter(m -> memberId(net, m).equals(leaderId)).findFirst().orElseThrow();
                List<String> others = names.stream().filter(m -> !m.equals(leader)).toList();

                for (String other : others) {
                    net.cut(leader, other);
                }
                EtcdCluster.await("the other two elect another leader", WITHIN, () -> {
                    String theirs = agreed(net, others);
                    return theirs != null && !theirs.equals(leaderId);
                });
                for (String other : others) {
                    net.heal(leader, other);
                }

                EtcdCluster.await("all three agree on one leader again", WITHIN, () -> agreed(net, names) != null);
            } finally {
                for (EtcdProcess member : members) {
                    member.close();
                }
            }
        }
        assertThat(Netns.list()).noneMatch(n -> n.startsWith(prefix + "-"));
    }

    /** The leader all of {@code names} know, or null when one knows none, another, or does not answer. */
    private static String agreed(Netns net, List<String> names) {
        Set<String> leaders = new HashSet<>();
        for (String m : names) {
            JsonNode status = status(net, m);
            leaders.add(status == null ? "0" : NetnsEtcdCluster.leaderId(status));
        }
        return leaders.size() == 1 && !leaders.contains("0") ? leaders.iterator().next() : null;
    }

    /**
     * Member {@code m}'s answer to etcd's status call, asked from its own host (this JVM runs outside the hosts, which
     * it cannot reach); null without one.
     */
    private static JsonNode status(Netns net, String m) {
        List<String> command = new ArrayList<>(net.exec(m));
        command.addAll(List.of(PYTHON, "-c", "import urllib.request; print(urllib.request.urlopen(urllib.request"
                + ".Request('http://" + net.address(m) + ":" + EtcdProcess.MEMBER_CLIENT_PORT
                + "/v3/maintenance/status', data=b'{}'), timeout=1).read().decode())"));
        try {
            Process p = new ProcessBuilder(command).redirectError(ProcessBuilder.Redirect.DISCARD).start();
            String out = new String(p.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
            return p.waitFor() == 0 ? HttpJson.MAPPER.readTree(out) : null;
        } catch (java.io.IOException e) {
            return null;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return null;
        }
    }

    private static String memberId(Netns net, String m) {
        JsonNode status = status(net, m);
        return status == null ? "" : status.path("header").path("member_id").asText();
    }
}
