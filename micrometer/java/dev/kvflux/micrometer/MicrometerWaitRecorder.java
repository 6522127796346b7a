package dev.kvflux.micrometer;

import dev.kvflux.bindings.StatusCode;
import dev.kvflux.operators.WaitOutcome;
import dev.kvflux.operators.WaitRecorder;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tag;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.Timer;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.concurrent.atomic.LongAdder;

/**
 * A {@link WaitRecorder} that records the waits' reports as Micrometer meters in a {@link MeterRegistry}:
 * {@code wait.recorder(MicrometerWaitRecorder.of(registry))}, or for every request of a WRITE pipeline
 * {@code WritePipeline.builder().recorder(MicrometerWaitRecorder.of(registry))}.
 *
 * <h2>Meters</h2>
 * Every meter is tagged {@code strategy} ({@code reactive}, {@code reactive-shared}, {@code reactive-push},
 * {@code native}, {@code sliced-native}) and with the common tags given to {@link #of(MeterRegistry, Iterable)}.
 * <table>
 *   <caption>kvflux wait meters (Prometheus names in brackets, with the registry's base unit: seconds)</caption>
 *   <tr><th>name</th><th>type</th><th>more tags</th><th>what</th></tr>
 *   <tr><td>{@code kvflux.wait.duration}</td><td>timer</td><td>{@code outcome}: {@code done},
 *       {@code failed}, {@code timed_out}, {@code stalled}, {@code cancelled}</td><td>from subscription to
 *       the wait's end ({@code kvflux_wait_duration_seconds})</td></tr>
 *   <tr><td>{@code kvflux.wait.detection.lag}</td><td>timer</td><td></td><td>from the end of a finished wait's
 *       last copy, as its backend saw it, to the wait seeing its last status settle; recorded only where every
 *       status's backend knows when its copies ended ({@code kvflux_wait_detection_lag_seconds})</td></tr>
 *   <tr><td>{@code kvflux.wait.active}</td><td>gauge</td><td></td><td>waits subscribed and not ended</td></tr>
 *   <tr><td>{@code kvflux.wait.statuses.in.flight}</td><td>gauge</td><td></td><td>statuses those waits are
 *       still waiting for, as far as they have seen</td></tr>
 *   <tr><td>{@code kvflux.wait.polls}</td><td>counter</td><td></td><td>poll rounds (the query at
 *       subscription, each slice, the last one at the timeout; a native wait's {@code waitAll} calls)</td></tr>
 *   <tr><td>{@code kvflux.wait.queries}</td><td>counter</td><td></td><td>status queries those rounds made</td></tr>
 *   <tr><td>{@code kvflux.wait.statuses.failed}</td><td>counter</td><td>{@code code}: the failure code,
 *       {@code ERR_RDMA_OP} ...</td><td>statuses seen failed ({@code ERR_BAD_STATE} also for a status that broke
 *       the status contract)</td></tr>
 *   <tr><td>{@code kvflux.wait.timeouts}</td><td>counter</td><td></td><td>waits that ended at their transfer
 *       timeout</td></tr>
 *   <tr><td>{@code kvflux.wait.stalls}</td><td>counter</td><td></td><td>waits that ended because no status left
 *       flight for their stall time</td></tr>
 * </table>
 * Timers publish no histogram unless {@link #histograms(boolean) histograms(true)} (or a {@code MeterFilter}
 * of the registry's) asks for one; with it, Prometheus can compute the detection lag's quantiles across
 * instances.
 *
 * <h2>Cost</h2>
 * A strategy's meters are registered on its first report and kept; a report looks them up by the
 * strategy's name (one comparison for the strategy last seen), then updates a counter, a timer or a
 * {@link LongAdder}: nothing is allocated per report. Thread-safe. Instances are immutable; the withers
 * return a recorder with meters of its own.
 */
public final class MicrometerWaitRecorder implements WaitRecorder {
    /** Timer: from subscription to the wait's end, tagged {@code strategy} and {@code outcome}. */
    public static final String DURATION = "kvflux.wait.duration";
    /** Timer: from the last copy's end to the wait seeing it, for waits that ended done, tagged {@code strategy}. */
    public static final String DETECTION_LAG = "kvflux.wait.detection.lag";
    /** Gauge: waits in progress. */
    public static final String ACTIVE = "kvflux.wait.active";
    /** Gauge: statuses the waits in progress are still waiting for. */
    public static final String STATUSES_IN_FLIGHT = "kvflux.wait.statuses.in.flight";
    /** Counter: poll rounds. */
    public static final String POLLS = "kvflux.wait.polls";
    /** Counter: status queries. */
    public static final String QUERIES = "kvflux.wait.queries";
    /** Counter: statuses seen failed, tagged {@code code}. */
    public static final String STATUSES_FAILED = "kvflux.wait.statuses.failed";
    /** Counter: waits ended by their transfer timeout. */
    public static final String TIMEOUTS = "kvflux.wait.timeouts";
    /** Counter: waits ended by a stall. */
    public static final String STALLS = "kvflux.wait.stalls";

    private final MeterRegistry registry;
    private final Tags commonTags;
    private final boolean histograms;
    private final ConcurrentHashMap<String, Meters> byStrategy = new ConcurrentHashMap<>();
    private volatile Meters last;

    private MicrometerWaitRecorder(MeterRegistry registry, Tags commonTags, boolean histograms) {
        this.registry = registry;
        this.commonTags = commonTags;
        this.histograms = histograms;
    }

    /** A recorder whose meters go to {@code registry}, tagged only as the class comment says. */
    public static MicrometerWaitRecorder of(MeterRegistry registry) {
        return of(registry, Tags.empty());
    }

    /**
     * A recorder whose meters go to {@code registry}, each also tagged with {@code commonTags} (for example
     * the role: {@code Tags.of("role", "prefill")}).
     *
     * @throws IllegalArgumentException if a common tag uses a key the meters set themselves
     */
    public static MicrometerWaitRecorder of(MeterRegistry registry, Iterable<Tag> commonTags) {
        Objects.requireNonNull(registry, "registry");
        Tags tags = Tags.of(Objects.requireNonNull(commonTags, "commonTags"));
        for (Tag tag : tags) {
            if (tag.getKey().equals("strategy") || tag.getKey().equals("outcome") || tag.getKey().equals("code")) {
                throw new IllegalArgumentException("common tag '" + tag.getKey() + "' clashes with the tag the wait"
                        + " meters set themselves; choose another key (strategy, outcome and code are taken)");
            }
        }
        return new MicrometerWaitRecorder(registry, tags, false);
    }

    /**
     * This recorder, its two timers publishing percentile histograms (buckets a monitoring system can
     * aggregate across instances) when {@code histograms} is true. Off by default: a histogram adds dozens of
     * series per tag combination.
     */
    public MicrometerWaitRecorder histograms(boolean histograms) {
        return new MicrometerWaitRecorder(registry, commonTags, histograms);
    }

    @Override
    public void recordWaitStarted(String strategy, int statuses) {
        meters(strategy).active.increment();
    }

    @Override
    public void recordStatusesInFlight(String strategy, int change) {
        meters(strategy).inFlight.add(change);
    }

    @Override
    public void recordStatusFailed(String strategy, StatusCode code) {
        meters(strategy).failed(code).increment();
    }

    @Override
    public void recordPolls(String strategy, int polls, long queries) {
        Meters m = meters(strategy);
        m.polls.increment(polls);
        m.queries.increment(queries);
    }

    @Override
    public void recordDetectionLag(String strategy, long lagNanos) {
        meters(strategy).detectionLag.record(lagNanos, TimeUnit.NANOSECONDS);
    }

    @Override
    public void recordWaitEnded(String strategy, WaitOutcome outcome, long durationNanos) {
        Meters m = meters(strategy);
        m.active.decrement();
        m.duration[outcome.ordinal()].record(Math.max(0, durationNanos), TimeUnit.NANOSECONDS);
        if (outcome == WaitOutcome.TIMED_OUT) {
            m.timeouts.increment();
        } else if (outcome == WaitOutcome.STALLED) {
            m.stalls.increment();
        }
    }

    @Override
    public String toString() {
        return "MicrometerWaitRecorder[" + registry.getClass().getSimpleName() + ", tags " + commonTags
                + (histograms ? ", histograms" : "") + "]";
    }

    private Meters meters(String strategy) {
        Meters m = last;
        if (m != null && m.strategy.equals(strategy)) {
            return m;
        }
        m = byStrategy.computeIfAbsent(strategy, Meters::new);
        last = m;
        return m;
    }

    /** One strategy's meters, registered together on its first report. */
    private final class Meters {
        final String strategy;
        final Tags tags;
        final Timer[] duration = new Timer[WaitOutcome.values().length];
        final Timer detectionLag;
        final LongAdder active = new LongAdder();
        final LongAdder inFlight = new LongAdder();
        final Counter polls;
        final Counter queries;
        final Counter timeouts;
        final Counter stalls;
        final AtomicReferenceArray<Counter> failedByCode = new AtomicReferenceArray<>(StatusCode.values().length);

        Meters(String strategy) {
            this.strategy = strategy;
            this.tags = commonTags.and("strategy", strategy);
            for (WaitOutcome outcome : WaitOutcome.values()) {
                duration[outcome.ordinal()] = Timer.builder(DURATION)
                        .description("Time from a wait's subscription to its end, by outcome")
                        .tags(tags).tag("outcome", outcome.tagValue())
                        .publishPercentileHistogram(histograms)
                        .register(registry);
            }
            detectionLag = Timer.builder(DETECTION_LAG)
                    .description("Time from a finished wait's last copy ending, on its backend's clock, to the wait"
                            + " seeing it")
                    .tags(tags).publishPercentileHistogram(histograms).register(registry);
            Gauge.builder(ACTIVE, active, LongAdder::sum).description("Waits in progress")
                    .tags(tags).strongReference(true).register(registry);
            Gauge.builder(STATUSES_IN_FLIGHT, inFlight, LongAdder::sum)
                    .description("Statuses the waits in progress are still waiting for")
                    .tags(tags).strongReference(true).register(registry);
            polls = Counter.builder(POLLS).description("Poll rounds of the waits").tags(tags).register(registry);
            queries = Counter.builder(QUERIES).description("Status queries of the waits").tags(tags).register(registry);
            timeouts = Counter.builder(TIMEOUTS).description("Waits ended by their transfer timeout")
                    .tags(tags).register(registry);
            stalls = Counter.builder(STALLS).description("Waits ended because no status left flight for their"
                    + " stall time").tags(tags).register(registry);
        }

        Counter failed(StatusCode code) {
            Counter counter = failedByCode.get(code.ordinal());
            if (counter == null) {
                counter = Counter.builder(STATUSES_FAILED).description("Statuses the waits saw fail, by code")
                        .tags(tags).tag("code", code.name()).register(registry);
                failedByCode.set(code.ordinal(), counter);
            }
            return counter;
        }
    }
}
