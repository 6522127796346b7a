package dev.kvflux.bindings.gpu;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.io.InputStream;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The driver-API plumbing of the scatter/gather path against a stand-in libcuda (built here with gcc)
 * that checks the module, the kernel's name and records the launch: no GPU needed.
 */
class ScatterGatherLaunchTest {
    @TempDir
    static Path dir;
    private static Path fake;
    private static MethodHandle launched;
    private static MethodHandle refuseModules;

    @BeforeAll
    static void buildFakeDriver() throws Exception {
        assumeTrue(ScatterGatherKernel.class.getResource(ScatterGatherKernel.RESOURCE) != null,
                "this build has no PTX (nvcc missing)");
        Path source = dir.resolve("fake_libcuda.c");
        try (InputStream in = ScatterGatherLaunchTest.class.getResourceAsStream("fake_libcuda.c")) {
            Files.write(source, in.readAllBytes());
        }
        fake = dir.resolve("libcuda.so.1");
        Process gcc;
        try {
            gcc = new ProcessBuilder("gcc", "-shared", "-fPIC", "-o", fake.toString(), source.toString())
                    .redirectErrorStream(true).start();
        } catch (IOException noGcc) {
            assumeTrue(false, "gcc is not installed: " + noGcc.getMessage());
            return;
        }
        assertThat(gcc.waitFor(60, TimeUnit.SECONDS)).isTrue();
        assertThat(gcc.exitValue()).as(new String(gcc.getInputStream().readAllBytes())).isZero();
        SymbolLookup lib = SymbolLookup.libraryLookup(fake, Arena.global());
        Linker linker = Linker.nativeLinker();
        launched = linker.downcallHandle(lib.find("fake_launch").orElseThrow(), FunctionDescriptor.of(JAVA_LONG, JAVA_INT));
        refuseModules = linker.downcallHandle(lib.find("fake_refuse_modules").orElseThrow(),
                FunctionDescriptor.ofVoid(JAVA_INT));
    }

    private static long launched(int i) throws Throwable {
        return (long) launched.invokeExact(i);
    }

    @Test
    void oneLaunchCarriesTheGridTheBuffersTheMetadataAndTheSegmentCount() throws Throwable {
        CudaDriver driver = CudaDriver.loadFirst(List.of(fake));
        try (ScatterGatherKernel kernel = ScatterGatherKernel.load(driver)) {
            GpuStream stream = new GpuStream(null, 0x7700L, 0);
            kernel.launch(stream, 0x10_0000L, 0x20_0000L, 0x30_0000L, 128, 32 * 1024);
        }
        assertThat(launched(0)).as("grid x: one row per segment").isEqualTo(128);
        assertThat(launched(1)).as("grid y: chunks of the largest segment").isEqualTo(1);
        assertThat(launched(2)).isEqualTo(1);
        assertThat(launched(3)).as("threads").isEqualTo(ScatterGatherKernel.THREADS);
        assertThat(launched(7)).as("the runtime's stream as the CUstream").isEqualTo(0x7700L);
        assertThat(launched(8)).as("src").isEqualTo(0x10_0000L);
        assertThat(launched(9)).as("dst").isEqualTo(0x20_0000L);
        assertThat(launched(10)).as("metadata").isEqualTo(0x30_0000L);
        assertThat(launched(11)).as("segments").isEqualTo(128);
    }

    @Test
    void aModuleTheDriverRefusesFailsWithTheDriversOwnErrorName() throws Throwable {
        CudaDriver driver = CudaDriver.loadFirst(List.of(fake));
        refuseModules.invokeExact(1);
        try {
            assertThatThrownBy(() -> ScatterGatherKernel.load(driver))
                    .isInstanceOf(GpuException.class)
                    .hasMessageStartingWith("cuModuleLoadData failed: CUDA_ERROR_INVALID_PTX (218: a PTX JIT"
                            + " compilation failed)")
                    .hasMessageContaining("older than the nvcc that built it");
        } finally {
            refuseModules.invokeExact(0);
        }
    }
}
