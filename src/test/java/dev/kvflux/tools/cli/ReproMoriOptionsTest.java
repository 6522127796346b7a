package dev.kvflux.tools.cli;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.PrintWriter;
import java.io.StringWriter;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

/** {@code kvflux repro}'s mori-only options: a wrong value or a wrong backend is one clear usage error. */
class ReproMoriOptionsTest {
    private final StringWriter err = new StringWriter();

    private int run(String... args) {
        return new CommandLine(new KvfluxCli()).setErr(new PrintWriter(err, true)).execute(args);
    }

    @Test
    void processesOtherThanOneOrTwoIsAUsageError() {
        int code = run("repro", "--backend", "mori", "--processes", "3");

        assertThat(code).isEqualTo(2);
        assertThat(err.toString()).startsWith("--processes must be 1 or 2, got 3").doesNotContain("Exception");
    }

    @Test
    void processesWithAnotherBackendIsAUsageError() {
        int code = run("repro", "--backend", "native-sim", "--processes", "2");

        assertThat(code).isEqualTo(2);
        assertThat(err.toString()).startsWith("--processes applies to --backend mori only");
    }

    @Test
    void anUnknownGpuPlatformIsAUsageErrorNamingTheChoices() {
        int code = run("repro", "--backend", "mori", "--gpu-platform", "metal");

        assertThat(code).isEqualTo(2);
        assertThat(err.toString()).startsWith("--gpu-platform must be cuda or hip, got 'metal'");
    }

    @Test
    void aGpuPlatformWithTheCudaBackendIsAUsageError() {
        int code = run("repro", "--backend", "cuda", "--gpu-platform", "hip");

        assertThat(code).isEqualTo(2);
        assertThat(err.toString()).startsWith("--gpu-platform applies to --backend mori only");
    }
}
