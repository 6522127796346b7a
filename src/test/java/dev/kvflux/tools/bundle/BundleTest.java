package dev.kvflux.tools.bundle;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvflux.tools.cli.CliCall;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The offline bundle's parts without jlink (CI builds and runs a whole one, .ci/run): the archive as {@code tar}
 * reads it, the jars left out, the launcher run by {@code /bin/sh} with an empty environment, and the errors of a
 * bundle that cannot be made.
 */
class BundleTest {
    @TempDir
    Path dir;

    @Test
    void theArchiveUnpacksWithTarKeepingModesLinksAndLongNames() throws Exception {
        Path tree = Files.createDirectories(dir.resolve("tree"));
        Path script = Files.writeString(tree.resolve("run.sh"), "#!/bin/sh\necho ran\n");
        Files.setPosixFilePermissions(script, PosixFilePermissions.fromString("rwxr-xr-x"));
        Path deep = Files.createDirectories(tree.resolve("a".repeat(60)).resolve("b".repeat(60)));
        byte[] payload = new byte[1000]; // not a multiple of the 512-byte block
        for (int i = 0; i < payload.length; i++) {
            payload[i] = (byte) i;
        }
        Files.write(deep.resolve("c".repeat(40) + ".bin"), payload);
        Files.createSymbolicLink(tree.resolve("link"), Path.of("run.sh"));
        Path archive = dir.resolve("t.tar.gz");

        TarGz.write(tree, "top", archive);

        Path out = Files.createDirectories(dir.resolve("out"));
        assertThat(run(dir, List.of("tar", "-xzf", archive.toString(), "-C", out.toString()))).isEmpty();
        Path unpacked = out.resolve("top");
        assertThat(Files.readString(unpacked.resolve("run.sh"))).isEqualTo("#!/bin/sh\necho ran\n");
        assertThat(Files.isExecutable(unpacked.resolve("run.sh"))).as("the executable bit").isTrue();
        assertThat(Files.readAllBytes(unpacked.resolve("a".repeat(60)).resolve("b".repeat(60))
                .resolve("c".repeat(40) + ".bin"))).as("a file under a name over 100 bytes").isEqualTo(payload);
        assertThat(Files.readSymbolicLink(unpacked.resolve("link"))).isEqualTo(Path.of("run.sh"));
    }

    @Test
    void aNameLongerThanATarHeaderHoldsIsRefusedNotCut() throws IOException {
        Path tree = Files.createDirectories(dir.resolve("tree"));
        Files.writeString(Files.createDirectories(tree.resolve("x".repeat(200))).resolve("y".repeat(120)), "z");

        assertThatThrownBy(() -> TarGz.write(tree, "top", dir.resolve("t.tar.gz"))).isInstanceOf(IOException.class)
                .hasMessageContaining("longer than a tar header holds");
    }

    @ParameterizedTest
    @CsvSource({
        "netty-codec-native-quic-4.2.17.Final-linux-x86_64.jar, true",
        "netty-codec-native-quic-4.2.17.Final-osx-aarch_64.jar, true",
        "netty-resolver-dns-native-macos-4.2.17.Final-osx-x86_64.jar, true",
        "netty-transport-native-epoll-4.2.17.Final-linux-aarch_64.jar, true",
        "netty-tcnative-boringssl-static-2.0.70.Final-windows-x86_64.jar, true",
        "netty-transport-native-epoll-4.2.17.Final-linux-x86_64.jar, false",
        "netty-transport-native-unix-common-4.2.17.Final.jar, false",
        "netty-codec-classes-quic-4.2.17.Final.jar, false",
        "netty-resolver-dns-classes-macos-4.2.17.Final.jar, false",
        "kvflux-bindings-0.1.0-SNAPSHOT.jar, false"})
    void jarsOfOtherPlatformsNativeCodeAreLeftOut(String jar, boolean leftOut) {
        assertThat(Bundle.foreign(jar)).isEqualTo(leftOut);
    }

    /** A bundle whose runtime/bin/java prints each argument it is given on a line, and the environment's MoRI. */
    private Path fakeBundle(boolean withMori) throws IOException {
        Path root = dir.resolve("kvflux-x");
        Path java = Files.createDirectories(root.resolve("runtime/bin")).resolve("java");
        Files.writeString(java, "#!/bin/sh\nfor a in \"$@\"; do echo \"arg $a\"; done\n"
                + "echo \"mori ${KVFLUX_MORI_LIB:-none}\"\necho \"arenas ${MALLOC_ARENA_MAX:-unset}\"\n"
                + "echo \"libraries ${LD_LIBRARY_PATH:-none}\"\n");
        Files.setPosixFilePermissions(java, PosixFilePermissions.fromString("rwxr-xr-x"));
        Files.createDirectories(root.resolve("config"));
        Files.writeString(root.resolve("config/role-jvm.options"), "# comment\n\n  -Xmx512m  \n-XX:+UseSerialGC\n");
        if (withMori) {
            Files.writeString(Files.createDirectories(root.resolve("mori")).resolve("libkvflux_mori.so"), "");
        }
        Path launcher = Files.createDirectories(root.resolve("bin")).resolve("kvflux");
        Files.writeString(launcher, Launcher.script());
        Files.setPosixFilePermissions(launcher, PosixFilePermissions.fromString("rwxr-xr-x"));
        return root;
    }

    @Test
    void theLauncherRunsTheBundlesJavaWithAnEmptyEnvironmentAndKeepsEachArgumentWhole() throws Exception {
        Path root = fakeBundle(false);

        List<String> lines = run(dir, List.of("env", "-i", root.resolve("bin/kvflux").toString(), "repro",
                "--config", "a file with spaces.yaml"));

        assertThat(lines).containsSubsequence("arg --enable-native-access=ALL-UNNAMED",
                "arg -cp", "arg " + root.toRealPath() + "/lib/*", "arg dev.kvflux.tools.cli.KvfluxCli", "arg repro",
                "arg --config", "arg a file with spaces.yaml");
        assertThat(lines).as("role options only for the roles").noneMatch(l -> l.contains("-Xmx512m"))
                .contains("mori none", "arenas unset", "libraries none");
    }

    @Test
    void aRoleGetsTheRoleOptionsThenKvfluxJavaOptsAndTheBundlesMori() throws Exception {
        Path root = fakeBundle(true);

        List<String> lines = run(root.resolve("bin"), List.of("env", "-i", "KVFLUX_JAVA_OPTS=-Xmx2g -Dx=1",
                "./kvflux", "decode", "--kv-blocks", "64"));

        assertThat(lines).containsSubsequence("arg -Xmx512m", "arg -XX:+UseSerialGC", "arg -Xmx2g", "arg -Dx=1",
                "arg -cp", "arg decode", "arg --kv-blocks", "arg 64");
        assertThat(lines).contains("mori " + root.toRealPath() + "/mori/libkvflux_mori.so", "arenas 2",
                "libraries " + root.toRealPath() + "/mori");
    }

    @Test
    void aLauncherRunThroughALinkSaysToRunItByItsRealPath() throws Exception {
        Path root = fakeBundle(false);
        Path elsewhere = Files.createDirectories(dir.resolve("usr/local/bin"));
        Files.createSymbolicLink(elsewhere.resolve("kvflux"), root.resolve("bin/kvflux"));

        Process p = new ProcessBuilder("env", "-i", elsewhere.resolve("kvflux").toString(), "--help")
                .redirectErrorStream(true).start();
        String output = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);

        assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
        assertThat(p.exitValue()).isEqualTo(1);
        assertThat(output.strip()).startsWith("kvflux: no runtime/bin/java beside").endsWith("not through a link")
                .doesNotContain("\n");
    }

    @Test
    void aGpuBundleWithoutAMoriBuildSaysHowToMakeOne() {
        assertThatThrownBy(() -> Bundle.moriLibraries(Bundle.Platform.CUDA, dir.resolve("mori-cuda")))
                .isInstanceOf(Bundle.BundleException.class)
                .hasMessageContaining("no MoRI build for cuda at " + dir.resolve("mori-cuda"))
                .hasMessageContaining("bindings/native/mori/build.sh --platform cuda");
    }

    @Test
    void aMoriBuildIsFoundInBuildShsOutputOrItsLibFolder() throws Exception {
        Path out = dir.resolve("mori-hip");
        Files.writeString(Files.createDirectories(out.resolve("lib")).resolve("libkvflux_mori.so"), "");

        assertThat(Bundle.moriLibraries(Bundle.Platform.HIP, out)).isEqualTo(out.resolve("lib"));
        assertThat(Bundle.moriLibraries(Bundle.Platform.HIP, out.resolve("lib"))).isEqualTo(out.resolve("lib"));
    }

    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
        "--platform arm --out b.tar.gz              | --platform must be sim, cuda or hip, got 'arm'",
        "--platform sim --out b.zip                 | --out must name a .tar.gz file, got 'b.zip'",
        "--platform sim --out b.tar.gz --mori m     | --mori is for --platform cuda or hip",
        "--platform sim                             | Missing required option: '--out=FILE.tar.gz'"})
    void aBadArgumentIsOneLineAndExitCode2(String args, String message) {
        CliCall.of("bundle", args).assertUsageError(message);
    }

    private static List<String> run(Path where, List<String> command) throws Exception {
        Process process = new ProcessBuilder(command).directory(where.toFile()).redirectErrorStream(true).start();
        String output = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(process.waitFor(60, TimeUnit.SECONDS)).isTrue();
        assertThat(process.exitValue()).as(output).isZero();
        return output.lines().toList();
    }
}
