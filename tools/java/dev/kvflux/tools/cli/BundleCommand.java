package dev.kvflux.tools.cli;

import dev.kvflux.tools.bundle.Bundle;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/** {@code kvflux bundle}: one archive that runs kvflux on a host without internet, a JDK or Maven. */
@Command(name = "bundle", mixinStandardHelpOptions = true,
        description = {"Builds one .tar.gz that runs kvflux on a Linux x86-64 host with no internet, JDK or Maven: a"
                + " jlink Java runtime, the application's jars without other platforms' native code, a bin/kvflux"
                + " launcher, and for cuda or hip the MoRI libraries of bindings/native/mori/build.sh with the host"
                + " libraries a GPU image lacks (libpci.so.3, libudev.so.1). Unpack it and run"
                + " bin/kvflux repro --backend native-sim (sim), or --backend mori --gpu 0 (cuda, hip)."})
public final class BundleCommand implements Callable<Integer> {
    @Spec
    CommandLine.Model.CommandSpec spec;

    @Option(names = "--platform", required = true, paramLabel = "sim|cuda|hip",
            description = "sim: the simulators only; cuda or hip: with MoRI built for that GPU platform.")
    String platform;

    @Option(names = "--out", required = true, paramLabel = "FILE.tar.gz", description = "The archive to write.")
    Path out;

    @Option(names = "--mori", paramLabel = "DIR",
            description = "build.sh's output for --platform cuda or hip (default target/mori-PLATFORM, as .ci/run"
                    + " builds it).")
    Path mori;

    @Override
    public Integer call() throws Exception {
        CommandLine cmd = spec.commandLine();
        Bundle.Platform chosen;
        try {
            chosen = Bundle.Platform.valueOf(platform.toUpperCase(Locale.ROOT));
        } catch (IllegalArgumentException e) {
            throw new CommandLine.ParameterException(cmd, "--platform must be sim, cuda or hip, got '" + platform
                    + "'");
        }
        OptionChecks.require(cmd, out.getFileName() != null && out.getFileName().toString().endsWith(".tar.gz"),
                "--out must name a .tar.gz file, got '" + out + "'");
        OptionChecks.require(cmd, !Files.isDirectory(out), "--out names a folder (" + out + "); give a file name");
        OptionChecks.require(cmd, mori == null || chosen != Bundle.Platform.SIM,
                "--mori is for --platform cuda or hip; the sim bundle carries the simulators only");
        Path moriDir = mori != null ? mori : Path.of("target", "mori-" + chosen.key());
        PrintWriter err = cmd.getErr();
        Bundle.Made made;
        try {
            made = Bundle.make(chosen, out, moriDir, System.getProperty("java.class.path"), err);
        } catch (Bundle.BundleException e) {
            err.println("kvflux bundle: " + e.getMessage());
            err.flush();
            return 1;
        }
        PrintWriter stdout = cmd.getOut();
        stdout.printf(Locale.ROOT, "%s: %.1f MiB, %d jars, %s%n", made.archive(), made.bytes() / 1048576.0,
                made.jars(), made.nativeLibraries().isEmpty() ? "simulators only"
                        : "MoRI for " + chosen.key() + " (" + made.nativeLibraries().size() + " libraries)");
        stdout.printf("run it: tar -xzf %s && kvflux-%s/bin/kvflux repro --backend %s%n", made.archive(),
                chosen.key(), chosen == Bundle.Platform.SIM ? "native-sim" : "mori --gpu 0");
        stdout.flush();
        return 0;
    }
}
