package dev.kvflux.tools.chaos;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvflux.tools.cli.CliCall;
import dev.kvflux.tools.cli.KvfluxCli;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import picocli.CommandLine;

/**
 * The partition faults run on hosts of their own only, and {@code --hosts netns} runs nothing else: each mistake is one
 * line and exit code 2 before anything starts. (CI runs three partition faults on real namespaces: .ci/run.)
 */
class ChaosHostsTest {
    @Test
    void thePartitionFaultsAreNamedAndListedApartFromTheLoopbackOnes() {
        assertThat(ChaosRun.PARTITION_FAULTS).containsExactly("partition-prefill-decode",
                "partition-prefill-decode-60s", "partition-prefill-to-decode", "partition-proxy-decode",
                "isolate-decode", "freeze-decode", "partition-proxy-etcd", "isolate-etcd-leader",
                "partition-decode-restart");
        assertThat(ChaosRun.ETCD_HOST_FAULTS).containsExactly("partition-proxy-etcd", "isolate-etcd-leader",
                "partition-decode-restart");
        assertThat(ChaosRun.FAULTS).doesNotContainAnyElementsOf(ChaosRun.PARTITION_FAULTS);
        assertThat(ChaosFault.named("freeze-decode")).isEqualTo(ChaosFault.Partition.DECODE_FROZEN);
        assertThat(ChaosFault.Partition.PREFILL_DECODE_LONG.lasts()).isEqualTo(Duration.ofSeconds(60));
    }

    @Test
    void aPartitionFaultOnLoopbackIsRefused() {
        ChaosRun.Settings settings = new ChaosRun.Settings(6, 3, Duration.ofSeconds(1), 64, 2,
                List.of("partition-prefill-decode"), Path.of("unused"));

        assertThatThrownBy(() -> new ChaosRun(settings)).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("partition-prefill-decode needs hosts of their own: run it with --hosts netns");
    }

    @Test
    void theFaultsAcrossEtcdAreRefusedOnLoopbackToo() {
        ChaosRun.Settings settings = new ChaosRun.Settings(6, 3, Duration.ofSeconds(1), 64, 2,
                List.of("isolate-etcd-leader"), Path.of("unused"));

        assertThatThrownBy(() -> new ChaosRun(settings)).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("isolate-etcd-leader needs hosts of their own: run it with --hosts netns");
    }

    @Test
    void theHostsOfEveryEtcdMemberAndProxyComeAfterTheOnesThePartitionFaultsUse() {
        assertThat(ChaosRun.HOSTS).containsExactly("client", "prefill", "decode", "proxya", "proxyb", "etcda",
                "etcdb", "etcdc");
    }

    @Test
    void chaosUsageListsTheFaultsAcrossEtcd() {
        String help = KvfluxCli.commandLine().getSubcommands().get("chaos").getUsageMessage(CommandLine.Help.Ansi.OFF)
                .replaceAll("\\s+", " ");

        assertThat(help).contains("partition-proxy-etcd", "isolate-etcd-leader", "partition-decode-restart");
    }

    @Test
    void aPartitionStruckWithoutHostsSaysSo() {
        assertThatThrownBy(() -> ChaosFault.Partition.PROXY_DECODE.strike(null, null, null, Duration.ZERO))
                .isInstanceOf(IllegalStateException.class).hasMessageContaining("--hosts netns");
    }

    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
        "--hosts moon                                  | --hosts must be loopback or netns, got 'moon'",
        "--hosts netns --faults decode-restart         | --hosts netns runs the partition faults only",
        "--faults freeze-decode                        | freeze-decode runs on hosts of their own: run it with --hosts netns",
        "--faults partition-proxy-etcd                 | partition-proxy-etcd runs on hosts of their own: run it with --hosts netns",
        "--faults proxy-kill,isolate-etcd-leader       | isolate-etcd-leader runs on hosts of their own: run it with --hosts netns",
        "--faults partition-decode-restart             | partition-decode-restart runs on hosts of their own: run it with --hosts netns",
        "--hosts netns --faults partition-proxy-etcd,etcd-restart | --hosts netns runs the partition faults only",
        "--hosts netns --faults meteor                 | unknown fault 'meteor'"})
    void aBadChoiceOfHostsOrFaultsIsOneLineAndExitCode2(String args, String message) {
        CliCall.of("chaos", args).assertUsageError(message);
    }
}
