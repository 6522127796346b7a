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
