package dev.kvflux.architecture;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/** No main Java source grows past a size a reader takes in at once: past 500 lines a file is split by its jobs. */
class SourceSizeTest {
    private static final int MAX_LINES = 500;
    private static final List<String> MODULES = List.of("bindings", "operators", "pipeline", "transfer", "micrometer",
            "serving", "tools");

    @Test
    void noMainJavaSourceIsLongerThan500Lines() throws IOException {
        Path root = repositoryRoot();
        Map<String, Integer> tooLong = new TreeMap<>();
        int files = 0;
        for (String module : MODULES) {
            try (Stream<Path> sources = Files.walk(root.resolve(module).resolve("java"))) {
                for (Path source : sources.filter(p -> p.toString().endsWith(".java")).toList()) {
                    files++;
                    int lines = lines(source);
                    if (lines > MAX_LINES) {
                        tooLong.put(root.relativize(source).toString(), lines);
                    }
                }
            }
        }
        assertThat(files).as("main sources found under " + root).isGreaterThan(100);
        assertThat(tooLong).as("main sources over " + MAX_LINES + " lines").isEmpty();
    }

    private static int lines(Path source) {
        try (Stream<String> lines = Files.lines(source)) {
            return (int) lines.count();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** The directory holding the modules: the working directory or one above it (Maven runs tests in tests/). */
    private static Path repositoryRoot() {
        Path here = Path.of("").toAbsolutePath();
        for (Path dir = here; dir != null; dir = dir.getParent()) {
            if (Files.isDirectory(dir.resolve("transfer").resolve("java")) && Files.isRegularFile(dir.resolve("pom.xml"))) {
                return dir;
            }
        }
        throw new IllegalStateException("no kvflux source tree at or above " + here);
    }
}
