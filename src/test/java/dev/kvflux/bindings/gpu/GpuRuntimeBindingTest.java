package dev.kvflux.bindings.gpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowableOfType;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The binding against the real runtimes installed on a machine without a GPU: HIP from Debian's
 * libamdhip64-5 (CI installs it), CUDA's libcudart where the toolkit is installed.
 */
class GpuRuntimeBindingTest {

    /**
     * The real HIP runtime. On a machine without Debian's libamdhip64-5 the test is skipped, saying so; in CI
     * (which installs it, and sets CI) it must load.
     */
    private static GpuRuntime hip() {
        try {
            return GpuRuntime.load(GpuPlatform.HIP);
        } catch (GpuLibraryNotFoundException e) {
            assumeTrue(System.getenv("CI") != null,
                    "libamdhip64.so is not installed here (apt-get install libamdhip64-5 to run this test)");
            throw e;
        }
    }

    private static GpuRuntime cuda() {
        assumeTrue(GpuPlatform.CUDA.candidates().stream().anyMatch(p -> p.getParent() != null && Files.exists(p)),
                "libcudart.so is not installed here (looked in /usr/local/cuda/lib64 and $CUDA_HOME/lib64)");
        return GpuRuntime.load(GpuPlatform.CUDA);
    }

    @Test
    void hipRuntimeLoadsAndReportsItsVersion() {
        GpuRuntime hip = hip();
        assertThat(hip.platform()).isEqualTo(GpuPlatform.HIP);
        assertThat(hip.runtimeVersion()).isPositive();
    }

    @Test
    void hipWithoutGpuTurnsHipErrorNoDeviceIntoAClearError() {
        GpuRuntime hip = hip();
        GpuException e = catchThrowableOfType(GpuException.class, hip::deviceCount);
        assertThat(e).isNotNull();
        assertThat(e.errorName()).isEqualTo("hipErrorNoDevice");
        assertThat(e.call()).isEqualTo("hipGetDeviceCount");
        assertThat(e.getMessage()).contains("hipGetDeviceCount failed: hipErrorNoDevice (100")
                .contains("No GPU is visible");
    }

    @Test
    void cudaRuntimeLoadsAndReportsItsVersion() {
        GpuRuntime cuda = cuda();
        assertThat(cuda.platform()).isEqualTo(GpuPlatform.CUDA);
        assertThat(cuda.runtimeVersion()).isGreaterThanOrEqualTo(11000);
    }

    @Test
    void cudaWithoutGpuNamesCudasOwnError() {
        GpuRuntime cuda = cuda();
        GpuException e = catchThrowableOfType(GpuException.class, cuda::deviceCount);
        assertThat(e).isNotNull();
        assertThat(e.errorName()).isIn("cudaErrorNoDevice", "cudaErrorInsufficientDriver");
        assertThat(e.call()).isEqualTo("cudaGetDeviceCount");
        assertThat(e.getMessage()).startsWith("cudaGetDeviceCount failed: " + e.errorName() + " (" + e.code() + ": ")
                .containsAnyOf("No GPU is visible", "The GPU driver is missing");
    }

    @Test
    void errorNamesComeFromTheRuntimeItself() {
        GpuRuntime hip = hip();
        assertThat(hip.errorName(600)).isEqualTo("hipErrorNotReady");
        assertThat(hip.errorString(100)).isNotBlank();
    }

    @Test
    void missingLibraryNamesTheLibraryAndThePackage() {
        assertThatThrownBy(() -> GpuRuntime.load(GpuPlatform.HIP, Path.of("/nonexistent/libamdhip64.so")))
                .isInstanceOf(GpuLibraryNotFoundException.class)
                .hasMessageContaining("libamdhip64.so")
                .hasMessageContaining("/nonexistent/libamdhip64.so: no such file")
                .hasMessageContaining("libamdhip64-5");
    }

    @Test
    void missingCudaRuntimeNamesTheToolkitDirectory() {
        assertThatThrownBy(() -> GpuRuntime.loadFirst(GpuPlatform.CUDA,
                List.of(Path.of("/nonexistent/lib64/libcudart.so"), Path.of("libcudart-not-here.so"))))
                .isInstanceOf(GpuLibraryNotFoundException.class)
                .hasMessageContaining("libcudart.so could not be loaded")
                .hasMessageContaining("libcudart-not-here.so")
                .hasMessageContaining("/usr/local/cuda/lib64");
    }

    @Test
    void aLibraryThatIsNotTheRuntimeIsRefusedWithTheMissingCall() {
        assertThatThrownBy(() -> GpuRuntime.load(GpuPlatform.CUDA, Path.of("libc.so.6")))
                .isInstanceOf(GpuLibraryNotFoundException.class)
                .hasMessageContaining("does not export cudaGetDeviceCount");
    }

    @Test
    void theRuntimePropertyPicksTheRuntime() {
        String before = System.getProperty(GpuRuntime.RUNTIME_PROPERTY);
        System.setProperty(GpuRuntime.RUNTIME_PROPERTY, "hip");
        try {
            hip();
            assertThat(GpuRuntime.load().platform()).isEqualTo(GpuPlatform.HIP);
        } finally {
            restore(GpuRuntime.RUNTIME_PROPERTY, before);
        }
    }

    @Test
    void theLibraryPropertyOverridesTheSearch() {
        String before = System.getProperty(GpuRuntime.LIBRARY_PROPERTY);
        System.setProperty(GpuRuntime.LIBRARY_PROPERTY, "/opt/elsewhere/libamdhip64.so");
        try {
            assertThatThrownBy(GpuRuntime::load)
                    .isInstanceOf(GpuLibraryNotFoundException.class)
                    .hasMessageContaining("tried /opt/elsewhere/libamdhip64.so: no such file")
                    .hasMessageNotContaining("/usr/local/cuda/lib64/libcudart.so:");
        } finally {
            restore(GpuRuntime.LIBRARY_PROPERTY, before);
        }
    }

    private static void restore(String key, String value) {
        if (value == null) {
            System.clearProperty(key);
        } else {
            System.setProperty(key, value);
        }
    }

    @Test
    void unknownRuntimeNameSaysWhichNamesWork() {
        assertThatThrownBy(() -> GpuPlatform.named("opencl"))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("use hip (AMD, libamdhip64.so) or cuda (NVIDIA, libcudart.so)");
    }
}
