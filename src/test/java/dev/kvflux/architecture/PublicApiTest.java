package dev.kvflux.architecture;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.bindings.TransferEngine;
import dev.kvflux.micrometer.MicrometerWaitRecorder;
import dev.kvflux.operators.CompletionWait;
import dev.kvflux.pipeline.WritePipeline;
import dev.kvflux.transfer.DecodeSide;
import java.io.IOException;
import java.lang.reflect.Executable;
import java.lang.reflect.Field;
import java.lang.reflect.Member;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.jar.JarFile;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * The library modules' public API is recorded in {@code tests/api/public-api.txt}: every public type of an exported
 * package and its public and protected constructors, methods and fields. A type or member that disappears from it
 * must be named in CHANGELOG.md, with what to write instead; from now on it is first deprecated
 * ({@code @Deprecated(forRemoval = true)}, which the record marks) for one version. Any change to the API, an addition
 * included, is recorded again with {@code -Dkvflux.api.record=true}, so that the record stays the baseline.
 */
class PublicApiTest {
    /** A class of each library module, to find the module's classes by. */
    private static final List<Class<?>> MODULES = List.of(TransferEngine.class, CompletionWait.class,
            WritePipeline.class, DecodeSide.class, MicrometerWaitRecorder.class);
    private static final String RECORD = "tests/api/public-api.txt";
    private static final String HEADER = "# The library modules' public API (bindings, operators, pipeline, transfer,"
            + " micrometer), recorded by PublicApiTest.\n# Record it again with: mvn -B -o -pl tests -am verify"
            + " -Dtest=PublicApiTest -Dsurefire.failIfNoSpecifiedTests=false -Dkvflux.api.record=true\n";

    @Test
    void noPublicTypeOrMemberOfALibraryModuleDisappearsWithoutAChangelogLine() throws Exception {
        Path record = root().resolve(RECORD);
        Set<String> now = publicApi();
        assertThat(now).as("public API lines found").hasSizeGreaterThan(500);
        if (Boolean.getBoolean("kvflux.api.record")) {
            Files.writeString(record, HEADER + String.join("\n", now) + "\n");
            return;
        }
        Set<String> recorded = Files.readAllLines(record).stream().filter(l -> !l.startsWith("#") && !l.isBlank())
                .collect(Collectors.toCollection(TreeSet::new));
        String changelog = Files.readString(root().resolve("CHANGELOG.md"));

        Set<String> gone = new TreeSet<>(recorded);
        gone.removeAll(now);
        Set<String> goneTypes = gone.stream().filter(l -> !l.contains("#") && !l.contains(" ."))
                .map(PublicApiTest::typeOf).collect(Collectors.toSet());
        List<String> unexplained = gone.stream()
                .filter(l -> !goneTypes.contains(typeOf(l)) || !l.contains("#") && !l.contains(" ."))
                .filter(l -> !changelog.contains(mention(l)))
                .filter(l -> !renamedOnly(l, now))
                .toList();
        assertThat(unexplained).as("public API that disappeared without a line in CHANGELOG.md naming it (write `"
                + "Type.member` and what to write instead; from now on deprecate with @Deprecated(forRemoval = true)"
                + " for one version first)").isEmpty();

        Set<String> unrecorded = new TreeSet<>(now);
        unrecorded.removeAll(recorded);
        assertThat(unrecorded.isEmpty() && gone.isEmpty())
                .as("the public API changed (new: " + unrecorded + ", gone: " + gone + "); record it again in " + RECORD
                        + " with -Dkvflux.api.record=true").isTrue();
    }

    /** A line whose member only gained or lost its deprecation mark is no removal. */
    private static boolean renamedOnly(String line, Set<String> now) {
        String bare = line.replace(" @Deprecated(forRemoval)", "");
        return now.contains(bare) || now.contains(bare + " @Deprecated(forRemoval)");
    }

    /** The type a line is about: its first word, up to a member's {@code #} or {@code  .}. */
    private static String typeOf(String line) {
        String first = line.split(" ")[0];
        return first.contains("#") ? first.substring(0, first.indexOf('#')) : first;
    }

    /** What CHANGELOG.md must hold about a line: {@code Type.member} for a member, the type's name for a type. */
    private static String mention(String line) {
        String type = typeOf(line);
        String simple = type.substring(type.lastIndexOf('.') + 1);
        if (line.contains("#")) {
            String member = line.substring(line.indexOf('#') + 1, line.indexOf('('));
            return member.equals("<init>") ? "new " + simple + "(" : simple + "." + member;
        }
        if (line.contains(" .")) {
            return simple + "." + line.substring(line.indexOf(" .") + 2).split(":")[0];
        }
        return simple;
    }

    /** The lines of the library modules' public API, sorted. */
    static Set<String> publicApi() throws IOException, URISyntaxException {
        Set<String> lines = new TreeSet<>();
        for (Class<?> anchor : MODULES) {
            for (String name : classNames(Path.of(anchor.getProtectionDomain().getCodeSource().getLocation().toURI()))) {
                Class<?> type;
                try {
                    type = Class.forName(name, false, anchor.getClassLoader());
                } catch (ClassNotFoundException | LinkageError e) {
                    continue; // needs an optional dependency that is not here
                }
                if (visible(type)) {
                    describe(type, lines);
                }
            }
        }
        return lines;
    }

    private static boolean visible(Class<?> type) {
        if (type.isSynthetic() || type.isAnonymousClass() || type.isLocalClass()
                || type.getPackageName().contains(".internal")) {
            return false;
        }
        for (Class<?> c = type; c != null; c = c.getDeclaringClass()) {
            if (!Modifier.isPublic(c.getModifiers())) {
                return false;
            }
        }
        return true;
    }

    private static void describe(Class<?> type, Set<String> lines) {
        String name = type.getCanonicalName();
        String kind = type.isAnnotation() ? "annotation" : type.isInterface() ? "interface" : type.isEnum() ? "enum"
                : type.isRecord() ? "record" : "class";
        lines.add(name + " " + kind + deprecation(type.getAnnotation(Deprecated.class)));
        boolean extensible = !Modifier.isFinal(type.getModifiers());
        List<Member> members = new ArrayList<>();
        members.addAll(Arrays.asList(type.getDeclaredConstructors()));
        members.addAll(Arrays.asList(type.getDeclaredMethods()));
        members.addAll(Arrays.asList(type.getDeclaredFields()));
        for (Member m : members) {
            int mod = m.getModifiers();
            if (m.isSynthetic() || m instanceof Method method && method.isBridge()
                    || !(Modifier.isPublic(mod) || extensible && Modifier.isProtected(mod))) {
                continue;
            }
            Deprecated deprecated = ((java.lang.reflect.AnnotatedElement) m).getAnnotation(Deprecated.class);
            if (m instanceof Field f) {
                lines.add(name + " ." + f.getName() + ": " + typeName(f.getType()) + deprecation(deprecated));
            } else {
                Executable e = (Executable) m;
                String params = Arrays.stream(e.getParameterTypes()).map(PublicApiTest::typeName)
                        .collect(Collectors.joining(", "));
                String returns = e instanceof Method method ? ": " + typeName(method.getReturnType()) : "";
                String member = e instanceof Method ? e.getName() : "<init>";
                lines.add(name + "#" + member + "(" + params + ")" + returns + deprecation(deprecated));
            }
        }
    }

    /** A type as source code names it: {@code DecodeSide.Builder}, not {@code DecodeSide$Builder}. */
    private static String typeName(Class<?> type) {
        return type.getCanonicalName() != null ? type.getCanonicalName() : type.getTypeName();
    }

    private static String deprecation(Deprecated deprecated) {
        return deprecated == null ? "" : deprecated.forRemoval() ? " @Deprecated(forRemoval)" : " @Deprecated";
    }

    /** The classes of a module's jar or classes folder, by binary name. */
    private static List<String> classNames(Path location) throws IOException {
        List<String> entries = new ArrayList<>();
        if (Files.isDirectory(location)) {
            try (Stream<Path> files = Files.walk(location)) {
                files.map(p -> location.relativize(p).toString().replace('\\', '/')).forEach(entries::add);
            }
        } else {
            try (JarFile jar = new JarFile(location.toFile())) {
                jar.stream().map(java.util.zip.ZipEntry::getName).forEach(entries::add);
            }
        }
        return entries.stream().filter(e -> e.endsWith(".class") && !e.endsWith("module-info.class")
                        && !e.endsWith("package-info.class") && !e.startsWith("META-INF/"))
                .map(e -> e.substring(0, e.length() - ".class".length()).replace('/', '.')).sorted().toList();
    }

    private static Path root() {
        Path here = Path.of("").toAbsolutePath();
        for (Path dir = here; dir != null; dir = dir.getParent()) {
            if (Files.isRegularFile(dir.resolve("CHANGELOG.md")) && Files.isDirectory(dir.resolve("tests"))) {
                return dir;
            }
        }
        throw new IllegalStateException("no CHANGELOG.md and tests/ at or above " + here);
    }
}
