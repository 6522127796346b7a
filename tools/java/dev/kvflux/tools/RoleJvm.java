package dev.kvflux.tools;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;

/**
 * The JVM a role process ({@code kvflux prefill}, {@code decode}, {@code proxy}) runs in, the same whether the
 * launcher ({@code ./kvflux}) starts it or a tool ({@code kvflux chaos}, {@code kvflux hostile}) does: the
 * options of {@code config/role-jvm.options} (heap, young generation, direct memory, metaspace, compiler
 * threads), then those of {@value #OPTIONS_VARIABLE}, so that the last setting of an option wins; and glibc
 * held to {@value #MALLOC_ARENAS} malloc arenas unless {@code MALLOC_ARENA_MAX} is set.
 */
public final class RoleJvm {
    /** The environment variable whose options follow the defaults. */
    public static final String OPTIONS_VARIABLE = "KVFLUX_JAVA_OPTS";
    /** The defaults' file: {@code config/} in the source tree, the classpath root at run time. */
    static final String DEFAULTS_RESOURCE = "role-jvm.options";
    /**
     * glibc's malloc arenas for a role, where glibc's default is 8 per core: each thread that frees native
     * memory (compiler threads, event loops releasing buffers) otherwise keeps its own arena's pages.
     */
    static final String MALLOC_ARENAS = "2";

    private RoleJvm() {
    }

    /**
     * The java command, as the launcher's, that runs {@code mainClass} in a role's JVM on this process's class
     * path: the defaults, {@value #OPTIONS_VARIABLE}'s options from {@code environment}, then {@code extra}.
     */
    public static List<String> command(Map<String, String> environment, List<String> extra, String mainClass) {
        List<String> command = new ArrayList<>();
        command.add(ProcessHandle.current().info().command().orElse("java"));
        command.addAll(List.of("--enable-native-access=ALL-UNNAMED", "--sun-misc-unsafe-memory-access=allow"));
        command.addAll(options(environment));
        command.addAll(extra);
        command.addAll(List.of("-cp", System.getProperty("java.class.path"), mainClass));
        return command;
    }

    /** The role JVM's options: the defaults, then those of {@value #OPTIONS_VARIABLE} in {@code environment}. */
    public static List<String> options(Map<String, String> environment) {
        List<String> options = new ArrayList<>(defaults());
        String more = environment.getOrDefault(OPTIONS_VARIABLE, "").strip();
        if (!more.isEmpty()) {
            options.addAll(Arrays.asList(more.split("\\s+")));
        }
        return options;
    }

    /** Holds glibc to {@value #MALLOC_ARENAS} malloc arenas in {@code process}'s environment, unless it is set. */
    public static ProcessBuilder environment(ProcessBuilder process) {
        process.environment().putIfAbsent("MALLOC_ARENA_MAX", MALLOC_ARENAS);
        return process;
    }

    /** The options of {@code role-jvm.options}: one a line, without blank lines and {@code #} comments. */
    static List<String> defaults() {
        try (InputStream in = RoleJvm.class.getClassLoader().getResourceAsStream(DEFAULTS_RESOURCE)) {
            if (in == null) {
                throw new IllegalStateException(DEFAULTS_RESOURCE + " is not on the class path; rebuild kvflux");
            }
            return new String(in.readAllBytes(), StandardCharsets.UTF_8).lines().map(String::strip)
                    .filter(line -> !line.isEmpty() && !line.startsWith("#")).toList();
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read " + DEFAULTS_RESOURCE, e);
        }
    }
}
