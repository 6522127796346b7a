package dev.kvflux.serving.role;

import dev.kvflux.bindings.TransferEngine;
import dev.kvflux.operators.NativeWait;
import dev.kvflux.operators.SlicedNativeWait;
import dev.kvflux.operators.WaitRecorder;
import dev.kvflux.operators.WaitStrategy;
import dev.kvflux.pipeline.WritePipeline;
import dev.kvflux.serving.config.KvfluxConfig;
import java.util.Locale;

/**
 * How a serving pair handles the end of a WRITE: which wait prefill runs, how many requests it writes at
 * once, whether it tells decode of a failure, and whether decode gives up at a deadline.
 */
public enum Policy {
    /**
     * vLLM's MoRI-IO connector before it sliced its wait: one native {@code waitAll} with the whole transfer timeout, on a single serial
     * write worker; a failed wait is logged and decode is told nothing; decode waits for ever.
     */
    LEGACY(false, false),
    /**
     * vLLM's MoRI-IO connector with its fix, the sliced wait ({@code sliced} on the command line; {@code seed}, its
     * old name, is a deprecated alias): the same worker and silence on failure, with the sliced native wait (10 ms
     * slices).
     */
    SLICED(false, false),
    /**
     * kvflux: the push wait where the engine pushes completion, else the adaptive poll ({@link WaitChoice}),
     * requests written independently (transfer.max-in-flight at once), {@code write_failed} with code and reason on
     * failure, and a receive deadline on decode.
     */
    KVFLUX(true, true);

    private final boolean failureNotice;
    private final boolean decodeDeadline;

    Policy(boolean failureNotice, boolean decodeDeadline) {
        this.failureNotice = failureNotice;
        this.decodeDeadline = decodeDeadline;
    }

    /**
     * Prefill's WRITE pipeline under this policy. LEGACY: one native wait with the whole timeout, one
     * request at a time. SLICED: the sliced native wait (fail-fast, the configured slice), one request at a
     * time. KVFLUX: the configured number of requests in flight, each waited for with the configured push wait
     * ({@link KvfluxConfig.Transfer#pushWait()}) where the engine can push completion, which this switches on
     * ({@link WaitChoice#pushOn}), else with the configured completion wait polling adaptively
     * ({@link KvfluxConfig.Transfer#completionWait()}, {@code adaptive()}); both take the fail mode and stall time,
     * the poll the slice. Every policy takes the configured event poll period and event timeout. The waits report
     * to no recorder.
     */
    public WritePipeline writePipeline(TransferEngine engine, KvfluxConfig.Transfer transfer) {
        return writePipeline(engine, transfer, WaitRecorder.NOOP);
    }

    /** As {@link #writePipeline(TransferEngine, KvfluxConfig.Transfer)}, every request's wait reporting to {@code recorder}. */
    public WritePipeline writePipeline(TransferEngine engine, KvfluxConfig.Transfer transfer, WaitRecorder recorder) {
        WaitStrategy wait = switch (this) {
            case LEGACY -> NativeWait.of(engine, transfer.timeout());
            case SLICED -> SlicedNativeWait.failFast(engine, transfer.timeout()).slice(transfer.slice());
            case KVFLUX -> WaitChoice.write(engine, transfer);
        };
        return WritePipeline.builder()
                .waitStrategy(wait)
                .maxInFlight(this == KVFLUX ? transfer.maxInFlight() : 1)
                .eventPollPeriod(transfer.eventPoll())
                .eventTimeout(transfer.eventTimeout())
                .recorder(recorder)
                .build();
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
     * The policy with that name; {@code seed}, the old name of {@link #SLICED}, is still read as it (see
     * {@link #deprecation}).
     *
     * @throws IllegalArgumentException naming the accepted values
     */
    public static Policy of(String name) {
        String wanted = name.trim().toLowerCase(Locale.ROOT);
        for (Policy policy : values()) {
            if (policy.wireName().equals(wanted)) {
                return policy;
            }
        }
        if (wanted.equals(DEPRECATED_SLICED)) {
            return SLICED;
        }
        throw new IllegalArgumentException("unknown policy '" + name + "'; expected legacy, sliced or kvflux");
    }

    /** The old name of {@link #SLICED}, read until a later version removes it. */
    private static final String DEPRECATED_SLICED = "seed";

    /**
     * What to tell a user who named a policy {@code name}: that the name is deprecated and what to write instead, or
     * null when it is a current name.
     */
    public static String deprecation(String name) {
        return name.trim().toLowerCase(Locale.ROOT).equals(DEPRECATED_SLICED) ? "policy name '" + DEPRECATED_SLICED
                + "' is deprecated and will be removed in a later version; write 'sliced' (vLLM's sliced native wait)"
                : null;
    }
}
