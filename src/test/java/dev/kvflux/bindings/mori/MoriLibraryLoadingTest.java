package dev.kvflux.bindings.mori;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowableOfType;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.kvflux.bindings.mori.internal.NativeLibraries;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** A missing or wrong library is an error that names it and says how to get it, not a raw link error. */
class MoriLibraryLoadingTest {

    @AfterEach
    void clearProperty() {
        System.clearProperty(NativeLibraries.MORI_PROPERTY);
    }

    private static MoriIoException loadingError() {
        return catchThrowableOfType(MoriIoException.class, MoriIo::mori);
    }

    @Test
    void aPathThatDoesNotExistIsNamedWithHowToBuildTheShim(@TempDir Path dir) {
        Path missing = dir.resolve("libkvflux_mori.so");
        System.setProperty(NativeLibraries.MORI_PROPERTY, missing.toString());

        MoriIoException error = loadingError();
        assertThat(error.code()).isEqualTo(MoriIoException.LIBRARY_UNAVAILABLE);
        assertThat(error.getMessage()).contains("-Dkvflux.mori.lib", missing.toString(), "is not a file",
                "cmake -S bindings/native/mori");
    }

    @Test
    void aFileThatIsNotALibraryCarriesTheLoadersReason(@TempDir Path dir) throws IOException {
        Path notElf = Files.writeString(dir.resolve("libkvflux_mori.so"), "not a shared object, only text\n".repeat(20));
        System.setProperty(NativeLibraries.MORI_PROPERTY, notElf.toString());

        MoriIoException error = loadingError();
        assertThat(error.getMessage()).contains(notElf.toString(), "could not be loaded", "cmake");
        assertThat(error.getMessage()).containsIgnoringCase("elf");
    }

    @Test
    void aLibraryWithoutTheAbiIsNamedAsNotAKvfluxShim() {
        Path libm = Path.of("/lib/x86_64-linux-gnu/libm.so.6");
        assumeTrue(Files.isRegularFile(libm), "needs the C math library at " + libm);
        System.setProperty(NativeLibraries.MORI_PROPERTY, libm.toString());

        MoriIoException error = loadingError();
        assertThat(error.getMessage()).contains(libm.toString(), "has no function kvflux_mori_abi_version",
                "not a kvflux MoRI IO library");
    }

    @Test
    void noShimOnTheLoadersPathIsNamedWithHowToGetIt() {
        assumeTrue(System.getenv(NativeLibraries.MORI_ENV) == null, "KVFLUX_MORI_LIB is set in this environment");
        MoriIoException error = loadingError();
        assertThat(error.getMessage()).contains("libkvflux_mori.so could not be loaded", "cmake",
                "-Dkvflux.mori.lib", "KVFLUX_MORI_LIB");
    }
}
