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
            default -> "See the runtime's documentation for " + errorName + ".";
        };
    }
}
