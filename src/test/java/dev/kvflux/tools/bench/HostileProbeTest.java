package dev.kvflux.tools.bench;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.tools.cli.KvfluxCli;
import dev.kvflux.transfer.notify.MalformedFrameException;
import dev.kvflux.transfer.notify.NotifyCodec;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** The hostile probe's frames and arguments; its figures come from {@code kvflux hostile}, not from here. */
class HostileProbeTest {

    @Test
    void everyHostileFrameFitsTheLimitAndMostAreRejectedByTheCodec() {
        List<byte[]> frames = HostileFrames.of(1 << 20);
        int rejected = 0;
        for (byte[] frame : frames) {
            assertThat(frame.length).isLessThanOrEqualTo(1 << 20);
            try {
                NotifyCodec.decode(frame);
            } catch (MalformedFrameException expected) {
                rejected++;
            }
        }
        assertThat(rejected).as("of %d frames", frames.size()).isGreaterThan(frames.size() / 2);
        assertThat(frames).anySatisfy(frame -> assertThat(frame).hasSize(1 << 20));
    }

    @ParameterizedTest
    @ValueSource(ints = {4096, 65_536, 100_000, 1 << 20})
    void everyLargestFrameTheProbeTakesYieldsFramesWithinIt(int max) {
        assertThat(HostileFrames.of(max)).allSatisfy(frame -> assertThat(frame.length)
                .isLessThanOrEqualTo(max));
    }

    @ParameterizedTest
    @ValueSource(strings = {"--frames=0", "--max-frame-bytes=2000000", "--max-frame-bytes=1000", "--connections=0",
            "--ack-samples=3", "--attack=nosuch", "--attack=slowloris,nosuch"})
    void badArgumentIsOneLineAndExitCode2(String argument) {
        StringWriter out = new StringWriter();
        StringWriter err = new StringWriter();
        int code = KvfluxCli.commandLine().setOut(new PrintWriter(out, true)).setErr(new PrintWriter(err, true))
                .execute("hostile", argument);

        assertThat(code).isEqualTo(2);
        assertThat(err.toString().lines().toList()).as(err.toString()).singleElement().asString()
                .doesNotContain("Exception");
        assertThat(out.toString()).isEmpty();
    }
}
