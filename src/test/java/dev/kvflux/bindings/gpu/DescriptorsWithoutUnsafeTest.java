package dev.kvflux.bindings.gpu;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * Packing and unpacking descriptors through msgpack-core prints no JDK warning about {@code sun.misc.Unsafe}: the
 * bindings choose msgpack-core's buffers that do not use it, so a JVM started without
 * {@code --sun-misc-unsafe-memory-access=allow} (an embedder's, a test's, a tool's child) stays quiet.
 */
class DescriptorsWithoutUnsafeTest {

    /** Packs and unpacks one descriptor: the child JVM's whole work. */
    public static final class PackOne {
        public static void main(String[] args) {
            byte[] handle = new byte[IpcMemHandle.SIZE];
            GpuMemoryDescriptor d = new GpuMemoryDescriptor("decode-1", 3, 1, 4096, 8192, new IpcMemHandle(handle));
            if (!GpuMemoryDescriptor.unpack(d.pack()).equals(d)) {
                throw new AssertionError("the descriptor did not survive msgpack");
            }
            System.out.println("packed");
        }
    }

    /** Runs {@link PackOne} in a JDK 25 of its own, warning of every use of Unsafe's memory access; its stderr. */
    private static String stderrOfAChildJvm(String... options) throws IOException, InterruptedException {
        String java = ProcessHandle.current().info().command()
                .orElse(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        List<String> command = new ArrayList<>(List.of(java, "--sun-misc-unsafe-memory-access=warn"));
        command.addAll(List.of(options));
        command.addAll(List.of("-cp", System.getProperty("java.class.path"), PackOne.class.getName()));
        Process child = new ProcessBuilder(command).redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
        String err = new String(child.getErrorStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(child.waitFor(60, TimeUnit.SECONDS)).as("the child JVM ended").isTrue();
        assertThat(child.exitValue()).as(err).isZero();
        return err;
    }

    @Test
    void descriptorsGoThroughMsgpackWithoutAnUnsafeWarning() throws Exception {
        assertThat(stderrOfAChildJvm()).doesNotContain("sun.misc.Unsafe");
    }

    @Test
    void msgpackCoresOwnBuffersWouldWarn() throws Exception {
        // the control: with msgpack-core's Unsafe buffers chosen by hand, the same child prints the JDK's warning
        assertThat(stderrOfAChildJvm("-Dmsgpack.universal-buffer=false")).contains("sun.misc.Unsafe")
                .contains("org.msgpack.core.buffer.MessageBuffer");
    }
}
