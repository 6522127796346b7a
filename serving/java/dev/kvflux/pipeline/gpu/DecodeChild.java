package dev.kvflux.pipeline.gpu;

import dev.kvflux.bindings.gpu.GpuRuntime;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/** Starts a reproducer's decode process: the same java, class path and library settings as this one. */
final class DecodeChild {
    /** System properties the child inherits: which GPU runtime and MoRI libraries to load. */
    private static final List<String> INHERITED = List.of(GpuRuntime.LIBRARY_PROPERTY, GpuRuntime.RUNTIME_PROPERTY,
            "kvflux.mori.lib");

    private DecodeChild() {
    }

    /** Runs {@code main} with {@code args} in a child JVM whose output goes to this process's. */
    static Process start(Class<?> main, List<String> args) throws IOException {
        String launcher = ProcessHandle.current().info().command()
                .orElse(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        List<String> command = new ArrayList<>(List.of(launcher, "--enable-native-access=ALL-UNNAMED",
                "-cp", System.getProperty("java.class.path")));
        for (String property : INHERITED) {
            String value = System.getProperty(property);
            if (value != null) {
                command.add("-D" + property + "=" + value);
            }
        }
        command.add(main.getName());
        command.addAll(args);
        return new ProcessBuilder(command).inheritIO().start();
    }
}
