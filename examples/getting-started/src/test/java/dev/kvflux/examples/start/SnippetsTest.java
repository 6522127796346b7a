package dev.kvflux.examples.start;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.pipeline.WriteOutcome;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Collections;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import reactor.test.StepVerifier;
import reactor.test.scheduler.VirtualTimeScheduler;

/**
 * The code the README, docs/embedding.md and docs/lifecycle.md show is the examples' code (this module's, and
 * examples/lifecycle's for the lifecycle): every block marked {@code <!-- snippet: FILE -->} stands in FILE line
 * for line (blank lines and indentation aside), so the docs cannot drift from what CI compiles and tests. And the
 * README's snippets run.
 */
class SnippetsTest {
    private static final Pattern MARKED = Pattern.compile("<!-- snippet: (\\S+) -->\\n```java\\n(.*?)\\n```",
            Pattern.DOTALL);

    /** The repository root: the example's directory is examples/getting-started. */
    private static Path root() {
        Path here = Path.of("").toAbsolutePath();
        for (Path dir = here; dir != null; dir = dir.getParent()) {
            if (Files.isRegularFile(dir.resolve("README.md")) && Files.isDirectory(dir.resolve("docs"))) {
                return dir;
            }
        }
        throw new IllegalStateException("no README.md and docs/ at or above " + here);
    }

    private static List<String> normalized(String text) {
        return text.lines().map(String::strip).filter(line -> !line.isEmpty()).toList();
    }

    private static int checkedBlocks(Path doc) throws IOException {
        Matcher block = MARKED.matcher(Files.readString(doc));
        int blocks = 0;
        while (block.find()) {
            blocks++;
            Path source = root().resolve(block.group(1));
            assertThat(source).as("the file a snippet of " + doc.getFileName() + " names").isRegularFile();
            List<String> shown = normalized(block.group(2));
            List<String> code = normalized(Files.readString(source));
            assertThat(Collections.indexOfSubList(code, shown))
                    .as(doc.getFileName() + " shows code that " + source.getFileName() + " does not hold:\n"
                            + String.join("\n", shown))
                    .isNotNegative();
        }
        return blocks;
    }

    @Test
    void everyMarkedSnippetOfTheReadmeAndTheEmbeddingAndLifecyclePagesStandsInItsFile() throws IOException {
        assertThat(checkedBlocks(root().resolve("README.md"))).as("marked snippets in README.md").isEqualTo(4);
        assertThat(checkedBlocks(root().resolve("docs").resolve("embedding.md"))).as("marked snippets in embedding.md")
                .isEqualTo(3);
        assertThat(checkedBlocks(root().resolve("docs").resolve("lifecycle.md"))).as("marked snippets in lifecycle.md")
                .isEqualTo(19);
    }

    @Test
    void theReadmesSnippetsRunOnTheSimulatedEngine() {
        StepVerifier.withVirtualTime(() -> new ReadmeSnippets(
                        KvSetup.simulated(VirtualTimeScheduler.get(), 4, 8, 4096, Duration.ofMillis(5), null), "t")
                        .write())
                .thenAwait(Duration.ofSeconds(1))
                .expectComplete()
                .verify(Duration.ofSeconds(5));

        // the READ flow and the pipeline subscribe themselves: virtual time set for the whole test, advanced by hand
        VirtualTimeScheduler clock = VirtualTimeScheduler.getOrSet();
        try {
            ReadmeSnippets snippets = new ReadmeSnippets(
                    KvSetup.simulated(clock, 4, 8, 4096, Duration.ofMillis(5), null), "t-1");
            snippets.read();
            snippets.pipelined();
            clock.advanceTimeBy(Duration.ofSeconds(1));

            assertThat(snippets.attended).containsExactly(0, 1, 2, 3);
            assertThat(snippets.told).containsExactly(new WriteOutcome.WriteDone("t-1"));
        } finally {
            VirtualTimeScheduler.reset();
        }
    }
}
