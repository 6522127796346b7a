package dev.kvflux.bindings.sim;

/** Which of MoRI's xGMI copy paths the simulated engine models. */
public enum CopyPath {
    /**
     * One async memcpy per block on a copy stream, then one event: slow per block, and independent of
     * the compute work queued on the GPU.
     */
    DEFAULT,
    /**
     * One kernel copies the whole batch (MoRI's scatter/gather module): fast, but the kernel runs on the
     * compute queue, so it finishes only after the prefill steps queued ahead of it
     * (see {@link SimulatedXgmiEngine#prefillStepQueued}).
     */
    SCATTER_GATHER
}
