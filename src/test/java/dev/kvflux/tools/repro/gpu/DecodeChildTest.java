package dev.kvflux.tools.repro.gpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/** Both GPU reproducers start their decode process and take its first answer through one handshake. */
class DecodeChildTest {

    @Test
    void theHandshakeReadsWhatTheChildSentOnTheChannelItOpened() throws Exception {
        AtomicReference<Process> started = new AtomicReference<>();
        String said = DecodeChild.connect(FakeDecodeChild.class,
                port -> List.of("--port", Integer.toString(port), "--say", "descriptor"), (child, channel) -> {
                    started.set(child);
                    String text = new String(channel.receiveDescriptor(), StandardCharsets.UTF_8);
                    channel.close();
                    return text;
                });

        assertThat(said).isEqualTo("descriptor");
        assertThat(started.get().waitFor(30, TimeUnit.SECONDS)).isTrue();
        assertThat(started.get().exitValue()).isZero();
    }

    @Test
    void aHandshakeThatFailsKillsTheChildAndSaysWhy() throws Exception {
        AtomicReference<Process> started = new AtomicReference<>();

        assertThatThrownBy(() -> DecodeChild.connect(FakeDecodeChild.class,
                port -> List.of("--port", Integer.toString(port), "--say", "descriptor"), (child, channel) -> {
                    started.set(child);
                    throw new IOException("descriptor did not unpack");
                })).isInstanceOf(IOException.class).hasMessage("descriptor did not unpack");

        assertThat(started.get().waitFor(30, TimeUnit.SECONDS)).isTrue();
        assertThat(started.get().isAlive()).isFalse();
    }
}
