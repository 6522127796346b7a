package dev.kvflux.bindings.mori;

import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.mori.internal.SimControls;
import java.time.Duration;
import java.util.Objects;

/**
 * The simulator's own controls ({@code kvflux_mori_sim.h}): its timing model, deterministic fault
 * injection, and a count of live handles for leak checks.
 */
public final class MoriSimulator {
    private final SimControls sim;

    MoriSimulator(SimControls sim) {
        this.sim = sim;
    }

    /** Handles of every kind not yet released, across the process. */
    public int liveHandles() {
        return sim.liveHandles();
    }

    /** Sets the engine's timing model for later posts: a cost per block plus bytes over a bandwidth. */
    public void setTiming(MoriEngine engine, Duration perBlock, long bytesPerSecond) {
        sim.setTiming(engine.handle(), perBlock.toNanos(), bytesPerSecond);
    }

    /** Makes the engine's {@code nth} batch (1-based, counted from its creation) fail with code and message. */
    public void failNth(MoriEngine engine, int nth, StatusCode code, String message) {
        Objects.requireNonNull(code, "code");
        sim.failNth(engine.handle(), nth, code.value(), Objects.requireNonNull(message, "message"));
    }

    /** Makes the engine's {@code nth} batch never complete. */
    public void hangNth(MoriEngine engine, int nth) {
        sim.hangNth(engine.handle(), nth);
    }

    /**
     * When the status's copy finished (or will, by the model), on {@link #nowNanos()}'s clock: the modelled
     * time, or when the bytes were really copied if that was later. From then on a query completes it.
     */
    public long finishNanos(MoriStatus status) {
        return sim.statusFinishNanos(status.handle());
    }

    /** The simulator's clock (CLOCK_MONOTONIC), in nanoseconds. */
    public long nowNanos() {
        return sim.nowNanos();
    }

    /** How many other processes' memories are mapped into this one for sessions (each closed with its last session). */
    public int openMappings() {
        return sim.openMappings();
    }

    /** Fails every {@code every}-th batch of the engine (counted from its creation) with code and message. */
    public void failEvery(MoriEngine engine, int every, StatusCode code, String message) {
        Objects.requireNonNull(code, "code");
        sim.faultEvery(engine.handle(), every, 0, code.value(), 0, Objects.requireNonNull(message, "message"));
    }

    /** Makes every {@code every}-th batch of the engine never complete. */
    public void hangEvery(MoriEngine engine, int every) {
        sim.faultEvery(engine.handle(), every, 1, 0, 0, "");
    }

    /** Lets every {@code every}-th batch of the engine succeed only {@code late} after its copy finished. */
    public void slowEvery(MoriEngine engine, int every, Duration late) {
        sim.faultEvery(engine.handle(), every, 2, 0, late.toNanos(), "");
    }
}
