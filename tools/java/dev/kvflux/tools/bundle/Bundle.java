package dev.kvflux.tools.bundle;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.jar.JarEntry;
import java.util.jar.JarOutputStream;
import java.util.regex.Pattern;
import java.util.spi.ToolProvider;
import java.util.stream.Stream;

/**
 * One archive that runs kvflux on a Linux x86-64 host with no JDK, no Maven and no network: a {@code jlink} Java
 * runtime, the application's jars without other platforms' native code, for a GPU platform the MoRI libraries of
 * {@code bindings/native/mori/build.sh} with the host libraries a GPU image lacks, and a {@code bin/kvflux}
 * launcher that needs nothing on the {@code PATH}.
 */
public final class Bundle {
    /** What the archive is for: the simulators only, or a GPU platform with the real MoRI beside them. */
    public enum Platform {
        SIM, CUDA, HIP;

        public String key() {
            return name().toLowerCase(Locale.ROOT);
        }
    }

    /**
     * The Java modules kvflux needs: its libraries (Netty, Reactor, Jackson, Logback, Micrometer) and the JDK
     * management beans it reads a process's CPU time and memory from, and {@code java.net.http} for OTLP export.
     */
    public static final List<String> MODULES = List.of("java.base", "java.logging", "java.management",
            "java.naming", "java.net.http", "java.xml", "jdk.management", "jdk.unsupported");

    /**
     * Libraries MoRI links against that its build host has (from {@code build.sh}'s packages) and a CUDA image
     * lacks, with the Debian package each comes from; they go beside MoRI's, which finds them through its RPATH.
     */
    public static final List<String[]> HOST_LIBRARIES = List.of(new String[] {"libpci.so.3", "libpci3"},
            new String[] {"libudev.so.1", "libudev1"});

    private static final List<Path> LIBRARY_FOLDERS = List.of(Path.of("/lib/x86_64-linux-gnu"),
            Path.of("/usr/lib/x86_64-linux-gnu"), Path.of("/lib64"), Path.of("/usr/lib64"));

    /** Jars of native code for other systems and processors, and Netty's QUIC natives, which kvflux never loads. */
    private static final Pattern FOREIGN = Pattern.compile(
            "netty-codec-native-quic-.*|.*-(osx|windows)-[a-z0-9_]+\\.jar|.*-linux-(aarch_64|riscv64|ppcle_64|s390_64)\\.jar");

    /** What went into an archive. */
    public record Made(Path archive, long bytes, int jars, int leftOut, List<String> nativeLibraries) {
    }

    /** A bundle that cannot be made, with what to do about it. */
    public static final class BundleException extends Exception {
        public BundleException(String message) {
            super(message);
        }
    }

    private Bundle() {
    }

    /** Whether a jar on the class path is native code kvflux does not load on Linux x86-64. */
    public static boolean foreign(String jarName) {
        return FOREIGN.matcher(jarName).matches();
    }

    /**
     * Where {@code build.sh}'s libraries are: {@code mori} itself or its {@code lib/} (build.sh's output folder),
     * checked to hold {@code libkvflux_mori.so}.
     */
    public static Path moriLibraries(Platform platform, Path mori) throws BundleException {
        for (Path candidate : List.of(mori.resolve("lib"), mori)) {
            if (Files.isRegularFile(candidate.resolve("libkvflux_mori.so"))) {
                return candidate;
            }
        }
        throw new BundleException("no MoRI build for " + platform.key() + " at " + mori
                + " (no libkvflux_mori.so there or in its lib/): build it with bindings/native/mori/build.sh --platform "
                + platform.key() + " --out " + mori + " (docs/gpu.md), or give --mori DIR");
    }

    /**
     * Makes the archive. {@code classPath} is this JVM's (the jars the command runs from); {@code mori} is
     * {@code build.sh}'s output for a GPU platform and unused for {@link Platform#SIM}.
     */
    public static Made make(Platform platform, Path archive, Path mori, String classPath, PrintWriter progress)
            throws BundleException, IOException {
        ToolProvider jlink = ToolProvider.findFirst("jlink").orElseThrow(() -> new BundleException(
                "this Java runtime (" + System.getProperty("java.home") + ") has no jlink: run kvflux bundle from a"
                        + " JDK 25, as ./kvflux does"));
        Path moriLib = platform == Platform.SIM ? null : moriLibraries(platform, mori);
        List<Path> hostLibraries = new ArrayList<>();
        if (moriLib != null) {
            for (String[] library : HOST_LIBRARIES) {
                hostLibraries.add(LIBRARY_FOLDERS.stream().map(f -> f.resolve(library[0])).filter(Files::isRegularFile)
                        .findFirst().orElseThrow(() -> new BundleException("MoRI needs " + library[0]
                                + ", which is not on this host: apt-get install " + library[1])));
            }
        }
        Path target = archive.toAbsolutePath();
        Path folder = target.getParent();
        try {
            Files.createDirectories(folder);
        } catch (IOException e) {
            throw new BundleException("cannot make the folder of --out, " + folder + ": " + e);
        }
        if (!Files.isWritable(folder)) {
            throw new BundleException("cannot write into " + folder + " (permission denied): give --out elsewhere");
        }
        String top = "kvflux-" + platform.key();
        Path staging = Files.createTempDirectory("kvflux-bundle-");
        try {
            Path root = Files.createDirectory(staging.resolve(top));
            progress.println("bundle: linking a Java runtime of " + String.join(", ", MODULES));
            progress.flush();
            Captured jlinkOut = new Captured();
            int rc = jlink.run(jlinkOut.printer(), jlinkOut.printer(), "--add-modules", String.join(",", MODULES),
                    "--output", root.resolve("runtime").toString(), "--strip-debug", "--no-header-files",
                    "--no-man-pages");
            if (rc != 0) {
                throw new BundleException("jlink failed (exit " + rc + "): " + jlinkOut.firstLine());
            }
            Path lib = Files.createDirectory(root.resolve("lib"));
            int jars = 0;
            int leftOut = 0;
            int folders = 0;
            for (String entry : classPath.split(java.io.File.pathSeparator)) {
                if (entry.isBlank()) {
                    continue;
                }
                Path path = Path.of(entry);
                if (Files.isDirectory(path)) {
                    jarUp(path, lib.resolve("classes-" + (++folders) + ".jar"));
                    jars++;
                } else if (Files.isRegularFile(path) && path.getFileName().toString().endsWith(".jar")) {
                    if (foreign(path.getFileName().toString())) {
                        leftOut++;
                    } else {
                        Files.copy(path, lib.resolve(path.getFileName()), StandardCopyOption.REPLACE_EXISTING);
                        jars++;
                    }
                }
            }
            List<String> natives = new ArrayList<>();
            if (moriLib != null) {
                Path moriTarget = Files.createDirectory(root.resolve("mori"));
                try (Stream<Path> files = Files.list(moriLib)) {
                    for (Path so : files.filter(p -> p.getFileName().toString().contains(".so")).sorted().toList()) {
                        Files.copy(so, moriTarget.resolve(so.getFileName()));
                        natives.add(so.getFileName().toString());
                    }
                }
                for (Path host : hostLibraries) {
                    Files.copy(host, moriTarget.resolve(host.getFileName())); // follows the link to the library itself
                    natives.add(host.getFileName() + " (from this host)");
                }
            }
            Path config = Files.createDirectory(root.resolve("config"));
            try (InputStream options = Bundle.class.getClassLoader().getResourceAsStream("role-jvm.options")) {
                if (options == null) {
                    throw new BundleException("role-jvm.options is not on the class path; rebuild kvflux");
                }
                Files.copy(options, config.resolve("role-jvm.options"));
            }
            Path bin = Files.createDirectory(root.resolve("bin"));
            Files.writeString(bin.resolve("kvflux"), Launcher.script(), StandardCharsets.UTF_8);
            Files.setPosixFilePermissions(bin.resolve("kvflux"), PosixFilePermissions.fromString("rwxr-xr-x"));
            Files.writeString(root.resolve("README.txt"), Launcher.readme(platform, top), StandardCharsets.UTF_8);
            progress.println("bundle: " + jars + " jars (" + leftOut + " of other platforms' native code left out)"
                    + (natives.isEmpty() ? "" : ", native libraries " + String.join(", ", natives)));
            progress.flush();
            // written beside it and moved into place whole: a failed run leaves no truncated archive behind
            Path part = folder.resolve(target.getFileName() + ".part");
            try {
                TarGz.write(root, top, part);
                Files.move(part, target, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
            } finally {
                Files.deleteIfExists(part);
            }
            return new Made(archive, Files.size(target), jars, leftOut, natives);
        } finally {
            delete(staging);
        }
    }

    private static void jarUp(Path folder, Path jar) throws IOException {
        try (OutputStream out = Files.newOutputStream(jar); JarOutputStream zip = new JarOutputStream(out);
             Stream<Path> walk = Files.walk(folder)) {
            for (Path path : walk.filter(Files::isRegularFile).sorted().toList()) {
                zip.putNextEntry(new JarEntry(folder.relativize(path).toString().replace('\\', '/')));
                Files.copy(path, zip);
                zip.closeEntry();
            }
        }
    }

    private static void delete(Path folder) throws IOException {
        try (Stream<Path> walk = Files.walk(folder)) {
            for (Path path : walk.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(path);
            }
        }
    }

    /** What jlink printed, kept for an error message. */
    private static final class Captured {
        private final ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        private final PrintWriter printer = new PrintWriter(bytes, true, StandardCharsets.UTF_8);

        PrintWriter printer() {
            return printer;
        }

        String firstLine() {
            printer.flush();
            String text = bytes.toString(StandardCharsets.UTF_8).strip();
            int end = text.indexOf('\n');
            return text.isEmpty() ? "(nothing printed)" : end < 0 ? text : text.substring(0, end);
        }
    }
}
