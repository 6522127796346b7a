package dev.kvflux.pipeline.serve;

import dev.kvflux.bindings.TransferEngine;
import dev.kvflux.operators.CompletionWait;
import dev.kvflux.operators.NativeWait;
import dev.kvflux.operators.SlicedNativeWait;
import dev.kvflux.operators.WaitStrategy;
import java.time.Duration;
import java.util.Locale;

/**
 * How a serving pair handles the end of a WRITE: which wait prefill runs, how many requests it writes at
 * once, whether it tells decode of a failure, and whether decode gives up at a deadline.
 */
public enum Policy {
    /**
     * vLLM before the seed: one native {@code waitAll} with the whole transfer timeout, on a single serial
     * write worker; a failed wait is logged and decode is told nothing; decode waits for ever.
     */
    LEGACY(1, false, false),
    /** The seed: the same worker and silence on failure, with the sliced native wait (10 ms slices). */
    SEED(1, false, false),
    /**
     * kvflux: the reactive completion wait, requests written independently (up to 64 at once),
     * {@code write_failed} with code and reason on failure, and a receive deadline on decode.
     */
    KVFLUX(64, true, true);

    private final int maxInFlight;
    private final boolean failureNotice;
    private final boolean decodeDeadline;

    Policy(int maxInFlight, boolean failureNotice, boolean decodeDeadline) {
        this.maxInFlight = maxInFlight;
        this.failureNotice = failureNotice;
        this.decodeDeadline = decodeDeadline;
    }

    /** The wait prefill runs before it sends the outcome. */
    public WaitStrategy waitStrategy(TransferEngine engine, Duration transferTimeout) {
        return switch (this) {
            case LEGACY -> NativeWait.of(engine, transferTimeout);
            case SEED -> SlicedNativeWait.failFast(engine, transferTimeout);
            case KVFLUX -> CompletionWait.failFast(transferTimeout);
        };
    }

    /** Requests the WRITE pipeline runs at once: 1 is vLLM's single write worker. */
    public int maxInFlight() {
        return maxInFlight;
    }

    /** Whether prefill sends {@code write_failed} when a write fails. */
    public boolean failureNotice() {
        return failureNotice;
    }

    /** Whether decode errors a request whose notice has not come by its receive deadline. */
    public boolean decodeDeadline() {
        return decodeDeadline;
    }

    /** The lower-case name the command line uses. */
    public String wireName() {
        return name().toLowerCase(Locale.ROOT);
    }

    /**
     * The policy with that name.
     *
     * @throws IllegalArgumentException naming the accepted values
     */
    public static Policy of(String name) {
        for (Policy policy : values()) {
            if (policy.wireName().equals(name.trim().toLowerCase(Locale.ROOT))) {
                return policy;
            }
        }
        throw new IllegalArgumentException("unknown policy '" + name + "'; expected legacy, seed or kvflux");
    }
}
