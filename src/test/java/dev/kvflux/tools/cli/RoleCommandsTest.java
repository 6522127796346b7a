package dev.kvflux.tools.cli;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.InetAddress;
import java.net.ServerSocket;
import org.junit.jupiter.api.Test;

/** The serving roles' answers to bad input and unusable ports: one clear line, no stack trace. */
class RoleCommandsTest {
    private final StringWriter err = new StringWriter();

    private int run(String... args) {
        return KvfluxCli.commandLine().setErr(new PrintWriter(err, true)).execute(args);
    }

    @Test
    void badModelOptionIsAUsageErrorNamingTheValue() {
        int code = run("decode", "--layers", "0", "--http-port", "1", "--notify-port", "1");

        assertThat(code).isEqualTo(2);
        assertThat(err.toString()).startsWith("invalid simulated model: ").contains("layers")
                .doesNotContain("Exception");
    }

    @Test
    void anOtlpEndpointThatIsNotAUrlIsAUsageErrorNamingTheOption() {
        int code = run("proxy", "--otlp-endpoint", "not a url", "--port", "0", "--discovery-port", "0");

        assertThat(code).isEqualTo(2);
        assertThat(err.toString()).startsWith("--otlp-endpoint: 'not a url' is not a URL").doesNotContain("Exception");
    }

    @Test
    void nonPositiveReceiveDeadlineIsAUsageError() {
        int code = run("decode", "--receive-deadline", "0s", "--http-port", "1", "--notify-port", "1");

        assertThat(code).isEqualTo(2);
        assertThat(err.toString()).contains("--receive-deadline must be greater than zero").doesNotContain("Exception");
    }

    @Test
    void anUnknownBackendIsAUsageErrorNamingTheOnesTheRolesRunOn() {
        int code = run("prefill", "--backend", "nope", "--http-port", "0", "--notify-port", "0");

        assertThat(code).isEqualTo(2);
        assertThat(err.toString()).startsWith("unknown backend 'nope'; the roles run on sim-xgmi, native-sim, cuda,"
                + " hip, mori").doesNotContain("Exception");
    }

    @Test
    void anUnknownKvModeIsAUsageErrorNamingTheModes() {
        int code = run("decode", "--kv-mode", "pull", "--http-port", "0", "--notify-port", "0");

        assertThat(code).isEqualTo(2);
        assertThat(err.toString()).startsWith("--kv-mode 'pull'; expected write or read").doesNotContain("Exception");
    }

    @Test
    void aGpuForABackendThatKeepsItsKvInHostMemoryIsAUsageError() {
        int code = run("decode", "--backend", "native-sim", "--gpu", "1", "--http-port", "0", "--notify-port", "0");

        assertThat(code).isEqualTo(2);
        assertThat(err.toString()).startsWith("--gpu chooses the GPU of --backend cuda, hip or mori")
                .doesNotContain("Exception");
    }

    @Test
    void aGpuBackendOnAMachineWithoutAGpuEndsTheRoleWithOneLine() {
        int code = run("prefill", "--backend", "hip", "--http-port", "0", "--notify-port", "0");

        assertThat(code).isEqualTo(1);
        assertThat(err.toString()).startsWith("kvflux prefill: --backend hip ").doesNotContain("Exception")
                .doesNotContain("\tat ");
        assertThat(err.toString().strip().lines()).hasSize(1);
    }

    @Test
    void chaosLeavesOutTheFaultsABackendLacksUnlessTheyAreAskedForByName() {
        assertThat(ChaosCommand.faultsOn("native-sim", dev.kvflux.tools.chaos.ChaosRun.FAULTS, true))
                .doesNotContain("sg-under-load").contains("status-stall", "decode-restart");
        assertThat(ChaosCommand.faultsOn("mori", dev.kvflux.tools.chaos.ChaosRun.FAULTS, true))
                .noneMatch(f -> f.startsWith("status-") || f.equals("sg-under-load")).contains("prefill-kill");
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> ChaosCommand.faultsOn("cuda",
                java.util.List.of("decode-restart", "status-stall"), false)).hasMessageContaining("status-stall")
                .hasMessageContaining("leave it out of --faults");
        assertThat(ChaosCommand.faultsOn("sim-xgmi", dev.kvflux.transfer.KvMode.READ,
                dev.kvflux.tools.chaos.ChaosRun.FAULTS, true)).as("READ mode runs no write copy path")
                .doesNotContain("sg-under-load").contains("status-stall", "decode-restart");
    }

    @Test
    void portInUseEndsTheRoleWithOneLine() throws IOException {
        try (ServerSocket busy = new ServerSocket(0, 50, InetAddress.getLoopbackAddress())) {
            int code = run("proxy", "--port", String.valueOf(busy.getLocalPort()), "--discovery-port", "0");

            assertThat(code).isEqualTo(1);
            assertThat(err.toString()).startsWith("kvflux proxy: cannot start the proxy on 127.0.0.1:"
                    + busy.getLocalPort()).contains("another process").doesNotContain("Exception");
        }
    }

    @Test
    void aBusyNotifyPortIsNamedAsInUseByAnotherProcess() throws IOException {
        try (ServerSocket busy = new ServerSocket(0, 50, InetAddress.getLoopbackAddress())) {
            int code = run("decode", "--notify-port", String.valueOf(busy.getLocalPort()), "--http-port", "0");

            assertThat(code).isEqualTo(1);
            assertThat(err.toString()).startsWith("kvflux decode: cannot listen for notifications on 127.0.0.1:"
                    + busy.getLocalPort() + ": port " + busy.getLocalPort() + " on 127.0.0.1 is in use by another process")
                    .doesNotContain("Exception");
        }
    }

    @Test
    void aHistoryLogThatCannotBeWrittenEndsTheRoleWithOneLine(@org.junit.jupiter.api.io.TempDir java.nio.file.Path dir)
            throws IOException {
        java.nio.file.Path file = java.nio.file.Files.createFile(dir.resolve("a-file")).resolve("history.jsonl");
        for (String role : new String[] {"decode", "prefill"}) {
            err.getBuffer().setLength(0);

            int code = run(role, "--history-log", file.toString(), "--http-port", "0", "--notify-port", "0");

            assertThat(code).as(role).isEqualTo(1);
            assertThat(err.toString()).as(role).startsWith("kvflux " + role + ": cannot write the history log " + file
                    + ": ").doesNotContain("Exception").hasLineCount(1);
        }
    }

    @Test
    void aNonLoopbackAddressWithoutANotifySecretIsRefusedBeforeAnythingBinds() {
        int code = run("proxy", "--host", "192.0.2.1", "--port", "0", "--discovery-port", "0");

        assertThat(code).isEqualTo(2);
        assertThat(err.toString()).contains("--host 192.0.2.1 is not a loopback address and no notify secret is set")
                .contains("KVFLUX_NOTIFY_SECRET").doesNotContain("Exception");
    }

    @Test
    void anAddressOfNoInterfaceIsNamedAsSuchForTheHttpPort() throws Exception {
        java.nio.file.Path config = java.nio.file.Files.createTempFile("kvflux-secret", ".yaml");
        java.nio.file.Files.writeString(config, "notify:\n  secret: role-commands-test-secret-0123456789\n");
        int code = run("proxy", "--host", "192.0.2.1", "--port", "0", "--discovery-port", "0", "--config",
                config.toString());

        assertThat(code).isEqualTo(1);
        assertThat(err.toString()).contains("address 192.0.2.1 is not one of this host's addresses")
                .doesNotContain("another process").doesNotContain("Exception");
    }
}
