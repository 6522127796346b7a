package dev.kvflux.tools.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvflux.serving.config.KvfluxConfig;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/** Where the serving subcommands take the notify secret from. */
class NotifySecretTest {
    private final CommandLine cmd = new CommandLine(new KvfluxCli());

    @TempDir
    Path dir;

    private KvfluxConfig withSecret(String secret) throws IOException {
        Path file = Files.writeString(dir.resolve("kvflux.yaml"), "notify:\n  secret: \"" + secret + "\"\n");
        return KvfluxConfig.load(Optional.of(file)).get();
    }

    @Test
    void noSecretAnywhereMeansUnsignedNotifications() {
        assertThat(NotifySecret.resolve(KvfluxConfig.defaults(), null, cmd)).isNull();
        assertThat(NotifySecret.resolve(KvfluxConfig.defaults(), "", cmd)).isNull();
    }

    @Test
    void configuredSecretIsUsed() throws IOException {
        assertThat(NotifySecret.resolve(withSecret("configured-secret-0123456789"), null, cmd)).isNotNull();
    }

    @Test
    void environmentSecretTakesPrecedenceAndIsChecked() throws IOException {
        assertThatThrownBy(() -> NotifySecret.resolve(withSecret("configured-secret-0123456789"), "short", cmd))
                .isInstanceOf(CommandLine.ParameterException.class)
                .hasMessageStartingWith("KVFLUX_NOTIFY_SECRET: ").hasMessageContaining("at least 16");
    }

    @Test
    void configuredSecretThatIsTooShortIsAnInvalidConfiguration() throws IOException {
        Path file = Files.writeString(dir.resolve("short.yaml"), "notify:\n  secret: short\n");

        assertThat(KvfluxConfig.load(Optional.of(file)).getError())
                .singleElement().asString().startsWith("notify.secret: is 5 characters");
    }
}
