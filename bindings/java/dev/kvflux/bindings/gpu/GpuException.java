package dev.kvflux.bindings.gpu;

/**
 * A GPU runtime call returned an error. The message names the runtime's own error
 * ({@code hipErrorNoDevice}, {@code cudaErrorInsufficientDriver}), the call, and what to do.
 */
public final class GpuException extends RuntimeException {
    private final int code;
    private final String errorName;
    private final String call;

    GpuException(int code, String errorName, String errorString, String call) {
        super(call + " failed: " + errorName + " (" + code + (errorString == null ? "" : ": " + errorString)
                + "). " + advice(errorName));
        this.code = code;
        this.errorName = errorName;
        this.call = call;
    }

    /** The runtime's numeric error code. */
    public int code() {
        return code;
    }

    /** The runtime's name for the error, {@code cudaErrorNoDevice}. */
    public String errorName() {
        return errorName;
    }

    /** The call that failed, {@code cudaGetDeviceCount}. */
    public String call() {
        return call;
    }

    /** What to do about an error, by the part of its name the two runtimes share. */
    static String advice(String errorName) {
        String n = errorName == null ? "" : errorName.replaceFirst("^(hip|cuda)Error", "");
        return switch (n) {
            case "NoDevice" -> "No GPU is visible to this process: check the driver (nvidia-smi or"
                    + " rocm-smi) and CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES.";
            case "InsufficientDriver" -> "The GPU driver is missing or older than this runtime: install or"
                    + " update the driver, or use a runtime the driver supports.";
            case "InvalidDevice" -> "The device ordinal is out of range: pick one below the device count.";
            case "MemoryAllocation", "OutOfMemory" -> "The device is out of memory: free buffers or register a"
                    + " smaller one.";
            case "PeerAccessUnsupported" -> "These two GPUs cannot reach each other's memory: use GPUs joined"
                    + " by NVLink / xGMI or PCIe peer access.";
            case "InvalidResourceHandle", "ContextIsDestroyed" -> "A stream, event or buffer was used after it"
                    + " was closed, or on another device: keep handles open while work is queued on them.";
            case "MapFailed", "InvalidHandle" -> "The IPC handle could not be opened: open it in another process"
                    + " on the same host, while the exporting process still holds the buffer.";
            case "NotReady" -> "The work is still running: query again later.";
            case "CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "CUDA_ERROR_INVALID_PTX" -> "The driver cannot compile the"
                    + " kernel's PTX: it is older than the nvcc that built it; update the driver or build with an"
                    + " older CUDA toolkit.";
            case "CUDA_ERROR_NO_BINARY_FOR_GPU" -> "The kernel was built for another GPU architecture: build the PTX"
                    + " for compute_90 or lower.";
            case "CUDA_ERROR_INVALID_CONTEXT" -> "No CUDA context is current on this thread: select the device"
                    + " through the runtime first.";
            case "CUDA_ERROR_NO_DEVICE" -> "No GPU is visible to this process: check nvidia-smi and"
                    + " CUDA_VISIBLE_DEVICES.";
            case "CUDA_ERROR_STUB_LIBRARY" -> "The loaded libcuda is the toolkit's stub, not the driver's: point"
                    + " the library path at the driver's libcuda.so.1.";
            case "CUDA_ERROR_ILLEGAL_ADDRESS", "CUDA_ERROR_LAUNCH_FAILED" -> "The kernel touched memory it may not:"
                    + " check the batch's offsets against both buffers; the context is now unusable.";
            default -> "See the runtime's documentation for " + errorName + ".";
        };
    }
}
