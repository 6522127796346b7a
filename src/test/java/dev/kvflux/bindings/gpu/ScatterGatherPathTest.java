package dev.kvflux.bindings.gpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/** The scatter/gather copy path's parts that need no GPU: the PTX in the build, the driver's loading. */
class ScatterGatherPathTest {

    private static boolean nvccInstalled() {
        Stream<Path> onPath = Stream.of(System.getenv().getOrDefault("PATH", "").split(":"))
                .filter(d -> !d.isEmpty()).map(d -> Path.of(d, "nvcc"));
        return Stream.concat(onPath, Stream.of(Path.of("/usr/local/cuda/bin/nvcc"))).anyMatch(Files::isExecutable);
    }

    @Test
    void theBuildShipsTheKernelsPtxWhereNvccIsInstalled() {
        assumeTrue(nvccInstalled(), "nvcc is not installed here: the build skips the PTX");
        assertThat(ScatterGatherKernel.class.getResource(ScatterGatherKernel.RESOURCE)).isNotNull();
    }

    @Test
    void thePtxDefinesTheKernelTheEngineLaunchesForHopper() {
        assumeTrue(nvccInstalled(), "nvcc is not installed here: the build skips the PTX");
        String ptx = new String(ScatterGatherKernel.ptx(), StandardCharsets.US_ASCII);
        assertThat(ptx).contains(".visible .entry " + ScatterGatherKernel.ENTRY + "(").contains(".target sm_90");
    }

    @Test
    void missingCudaDriverNamesLibcudaAndWhatToDo() {
        assertThatThrownBy(() -> CudaDriver.loadFirst(List.of(Path.of("/nonexistent/lib/libcuda.so.1"))))
                .isInstanceOf(GpuLibraryNotFoundException.class)
                .hasMessageContaining("CUDA driver library libcuda.so.1 could not be loaded")
                .hasMessageContaining("/nonexistent/lib/libcuda.so.1: no such file")
                .hasMessageContaining("install the NVIDIA driver")
                .hasMessageContaining("-D" + CudaDriver.LIBRARY_PROPERTY)
                .hasMessageContaining("leave the scatter/gather threshold unset");
    }

    @Test
    void aLibraryThatIsNotTheDriverIsRefusedWithTheMissingCall() {
        assertThatThrownBy(() -> CudaDriver.loadFirst(List.of(Path.of("libc.so.6"))))
                .isInstanceOf(GpuLibraryNotFoundException.class)
                .hasMessageContaining("libc.so.6 does not export cuInit");
    }

    @Test
    void theDefaultSearchFailsClearlyWhereNoDriverIsInstalled() {
        assumeTrue(Stream.of("/usr/lib/x86_64-linux-gnu/libcuda.so.1", "/usr/local/nvidia/lib64/libcuda.so.1",
                "/usr/lib64/libcuda.so.1").map(Path::of).noneMatch(Files::exists), "a CUDA driver is installed here");
        assertThatThrownBy(CudaDriver::load)
                .isInstanceOf(GpuLibraryNotFoundException.class)
                .hasMessageContaining("tried libcuda.so.1: ")
                .hasMessageContaining("/usr/local/nvidia/lib64/libcuda.so.1: no such file");
    }

    @Test
    void driverErrorsGetAdviceByTheDriversOwnName() {
        GpuException e = new GpuException(222, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
                "the provided PTX was compiled with an unsupported toolchain.", "cuModuleLoadData");
        assertThat(e.getMessage()).startsWith("cuModuleLoadData failed: CUDA_ERROR_UNSUPPORTED_PTX_VERSION (222: ")
                .contains("older than the nvcc that built it");
    }

    @Test
    void aSegmentOfOneChunkIsCopiedByOneBlock() {
        assertThat(ScatterGatherKernel.chunks(32 * 1024)).isEqualTo(1);
        assertThat(ScatterGatherKernel.chunks(ScatterGatherKernel.CHUNK)).isEqualTo(1);
    }

    @Test
    void largeSegmentsSpreadOverChunksUpToTheGridLimit() {
        assertThat(ScatterGatherKernel.chunks(8L << 20)).isEqualTo(128);
        assertThat(ScatterGatherKernel.chunks(ScatterGatherKernel.CHUNK + 1)).isEqualTo(2);
        assertThat(ScatterGatherKernel.chunks(1L << 40)).isEqualTo(ScatterGatherKernel.MAX_CHUNKS);
    }
}
