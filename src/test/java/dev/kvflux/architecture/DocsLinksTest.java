package dev.kvflux.architecture;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * The front page stays a front page, and the documentation's links lead somewhere: every relative link of README.md
 * and of the pages in docs/ names a file or folder that exists, and every {@code #anchor} a heading of its page.
 */
class DocsLinksTest {
    private static final Pattern LINK = Pattern.compile("\\[[^\\]]*\\]\\(([^)\\s]+)\\)");
    private static final Pattern HEADING = Pattern.compile("(?m)^#{1,6} (.+)$");
    private static final Pattern FENCE = Pattern.compile("(?ms)^```.*?^```");

    @Test
    void theReadmeIsAtMost200LinesAndOpensWithItsTwoCommands() throws IOException {
        List<String> lines = Files.readAllLines(root().resolve("README.md"));

        assertThat(lines).hasSizeLessThanOrEqualTo(200);
        // CI runs the README's test command: the two commands stay at the top
        assertThat(lines.subList(0, 6)).anySatisfy(line -> assertThat(line).startsWith("./kvflux repro"))
                .anySatisfy(line -> assertThat(line).startsWith("mvn -B verify"));
    }

    @Test
    void everyRelativeLinkOfTheReadmeAndTheDocsResolves() throws IOException {
        List<Path> pages = new ArrayList<>(List.of(root().resolve("README.md"), root().resolve("CHANGELOG.md")));
        try (Stream<Path> docs = Files.list(root().resolve("docs"))) {
            docs.filter(p -> p.toString().endsWith(".md")).sorted().forEach(pages::add);
        }
        Set<String> broken = new TreeSet<>();
        int links = 0;
        for (Path page : pages) {
            String text = FENCE.matcher(Files.readString(page)).replaceAll("");
            Matcher link = LINK.matcher(text);
            while (link.find()) {
                String target = link.group(1);
                if (target.matches("^[a-z]+:.*")) {
                    continue; // http:, https:, mailto:
                }
                links++;
                String file = target.contains("#") ? target.substring(0, target.indexOf('#')) : target;
                String anchor = target.contains("#") ? target.substring(target.indexOf('#') + 1) : null;
                Path resolved = file.isEmpty() ? page : page.getParent().resolve(file).normalize();
                String where = root().relativize(page) + ": " + target;
                if (!Files.exists(resolved)) {
                    broken.add(where + " (no such file)");
                } else if (anchor != null && resolved.toString().endsWith(".md")
                        && !anchors(Files.readString(resolved)).contains(anchor)) {
                    broken.add(where + " (no such heading)");
                }
            }
        }
        assertThat(links).as("relative links found").isGreaterThan(50);
        assertThat(broken).as("links that lead nowhere").isEmpty();
    }

    /** The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces as hyphens. */
    static Set<String> anchors(String markdown) {
        Set<String> anchors = new TreeSet<>();
        Matcher heading = HEADING.matcher(FENCE.matcher(markdown).replaceAll(""));
        while (heading.find()) {
            String slug = heading.group(1).strip().toLowerCase(Locale.ROOT)
                    .replaceAll("[^\\p{L}\\p{N} _-]", "").replace(' ', '-');
            String unique = slug;
            for (int n = 1; !anchors.add(unique); n++) {
                unique = slug + "-" + n;
            }
        }
        return anchors;
    }

    private static Path root() {
        Path here = Path.of("").toAbsolutePath();
        for (Path dir = here; dir != null; dir = dir.getParent()) {
            if (Files.isRegularFile(dir.resolve("README.md")) && Files.isDirectory(dir.resolve("docs"))) {
                return dir;
            }
        }
        throw new IllegalStateException("no README.md and docs/ at or above " + here);
    }
}
