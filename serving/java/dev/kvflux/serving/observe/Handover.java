package dev.kvflux.serving.observe;

import dev.kvflux.serving.metrics.RoleMetrics;
import io.micrometer.core.instrument.Timer;
import java.util.Locale;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReferenceArray;

/**
 * The handover of one request from prefill to decode, stage by stage: where the time goes between the proxy taking
 * the request in and the client's first byte. Each role marks the stages it sees, in order, on
 * {@link System#nanoTime()}:
 * <ul>
 *   <li>the proxy: {@link Stage#PROXY_IN}, {@link Stage#PREFILL_ANSWERED}, {@link Stage#CLIENT_FIRST_BYTE};</li>
 *   <li>prefill: {@link Stage#PREFILL_ADMITTED}, {@link Stage#FORWARD_STARTED}, {@link Stage#BLOCK_LIST_RECEIVED},
 *       {@link Stage#LAST_LAYER_READY}, {@link Stage#LAST_COPY_ENDED}, {@link Stage#WAIT_ENDED};</li>
 *   <li>decode: {@link Stage#WRITE_DONE_RECEIVED}, {@link Stage#DECODE_ADMITTED}, {@link Stage#FIRST_TOKEN_OUT}.</li>
 * </ul>
 * Each mark after a role's first is timed from the role's previous mark of the same request, into the timer
 * {@value #METER} tagged {@code stage} with the later stage's {@link Stage#label() label} (Prometheus
 * {@code kvflux_handover_stage_seconds{stage="wait_ended"}}: from the last copy's end to the wait seeing it). The
 * stages between roles (proxy in to prefill admitted, wait ended to write_done received, first token out to the
 * client's first byte) are not timed by any one role, as their clocks differ; a {@link Listener} given every mark
 * with its time can time them where the roles share one clock ({@code kvflux serve-bench} runs them in one process).
 *
 * <p>With tensor parallelism, prefill marks the stages of its first rank's link. Thread-safe.
 */
public final class Handover {
    /** The timer every stage is recorded in, tagged {@code stage}. */
    public static final String METER = "kvflux.handover.stage";

    /** Handover that records nothing and tells no one. */
    public static final Handover NONE = new Handover(null, Listener.NONE);

    /** The stages of a request's handover, in the order they happen. */
    public enum Stage {
        /** The proxy took the request in (before reading its body). */
        PROXY_IN,
        /** Prefill admitted the request: its transfer is open and its prompt is queued for a prefill step. */
        PREFILL_ADMITTED,
        /**
         * Prefill's forward pass over the request's last part began (its step's planned start): from here each layer's
         * copies go out as the layer turns ready, once decode's block list is here.
         */
        FORWARD_STARTED,
        /**
         * Prefill's write holds decode's block list, so its copies can be posted. A list that came before the forward
         * began counts as received at the forward's start, so the time from {@link #FORWARD_STARTED} bounds how long
         * the forward's copies waited for it (a layer not yet ready waited for nothing).
         */
        BLOCK_LIST_RECEIVED,
        /**
         * The proxy received prefill's answer, its one token: when prefill's own first token is out. It comes about
         * when prefill's last layer turns ready (the step's end), so it stands beside the transfer's stages, not
         * between them; a proxy that has passed decode's first byte on before it does not mark it.
         */
        PREFILL_ANSWERED,
        /** The last layer's event turned ready and its copies were posted. */
        LAST_LAYER_READY,
        /** The last copy ended, as the backend tells it (not when a wait saw it). */
        LAST_COPY_ENDED,
        /** Prefill's completion wait ended with every copy done. */
        WAIT_ENDED,
        /** Decode received {@code write_done}. */
        WRITE_DONE_RECEIVED,
        /** Decode took the request into its decode steps, its KV whole. */
        DECODE_ADMITTED,
        /** Decode sent its first token (the whole answer, when not streamed). */
        FIRST_TOKEN_OUT,
        /** The proxy passed decode's first byte on to the client. */
        CLIENT_FIRST_BYTE;

        /** The stage as its tag value and table row name: {@code last_copy_ended}. */
        public String label() {
            return name().toLowerCase(Locale.ROOT);
        }
    }

    /** Hears every mark of every request, with its time; must be quick, thread-safe and never block. */
    @FunctionalInterface
    public interface Listener {
        /** Hears nothing. */
        Listener NONE = (transferId, stage, nanoTime) -> { };

        /** Request {@code transferId} reached {@code stage} at {@code nanoTime} ({@link System#nanoTime()}). */
        void reached(String transferId, Stage stage, long nanoTime);
    }

    private final RoleMetrics meters;
    private final Listener listener;
    private final AtomicReferenceArray<Timer> timers = new AtomicReferenceArray<>(Stage.values().length);

    private Handover(RoleMetrics meters, Listener listener) {
        this.meters = meters;
        this.listener = listener;
    }

    /** Stages timed into {@code meters} and told to {@code listener}. */
    public static Handover of(RoleMetrics meters, Listener listener) {
        return new Handover(Objects.requireNonNull(meters, "meters"), Objects.requireNonNull(listener, "listener"));
    }

    /** The marks of one request, {@code transferId}. */
    public Marks begin(String transferId) {
        return new Marks(Objects.requireNonNull(transferId, "transferId"));
    }

    private Timer timer(Stage stage) {
        Timer timer = timers.get(stage.ordinal());
        if (timer == null) {
            timer = meters.timer(METER, "Time from a request's previous handover stage on this role to this one",
                    "stage", stage.label());
            timers.set(stage.ordinal(), timer);
        }
        return timer;
    }

    /** One request's marks on one role. Thread-safe; a stage marked out of order or twice is ignored. */
    public final class Marks {
        private final String transferId;
        private Stage last;
        private long lastAt;

        private Marks(String transferId) {
            this.transferId = transferId;
        }

        /** The request reached {@code stage} now. */
        public void reached(Stage stage) {
            reached(stage, System.nanoTime());
        }

        /** The request reached {@code stage} at {@code nanoTime} ({@link System#nanoTime()}). */
        public void reached(Stage stage, long nanoTime) {
            long since;
            synchronized (this) {
                if (last != null && stage.ordinal() <= last.ordinal()) {
                    return;
                }
                since = last == null ? -1 : Math.max(0, nanoTime - lastAt);
                last = stage;
                lastAt = nanoTime;
            }
            if (since >= 0 && meters != null) {
                timer(stage).record(since, TimeUnit.NANOSECONDS);
            }
            listener.reached(transferId, stage, nanoTime);
        }
    }
}
