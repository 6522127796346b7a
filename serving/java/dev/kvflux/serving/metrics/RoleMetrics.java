package dev.kvflux.serving.metrics;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.DistributionSummary;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.Timer;
import io.micrometer.core.instrument.composite.CompositeMeterRegistry;
import io.micrometer.core.instrument.config.MeterFilter;
import io.micrometer.core.instrument.distribution.DistributionStatisticConfig;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import io.netty.handler.codec.http.HttpHeaderNames;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.ToDoubleFunction;
import org.reactivestreams.Publisher;
import reactor.core.publisher.Mono;
import reactor.netty.http.server.HttpServerResponse;

/**
 * The meters of one serving role (prefill, decode or proxy): every meter it registers carries the tag
 * {@code role}, so roles of different kinds may share one registry (two of one kind would share meters:
 * give each its own registry). {@code GET /metrics} serves them as Prometheus text
 * ({@link #CONTENT_TYPE}) scraped from a {@link PrometheusMeterRegistry}: the registry given when it is one
 * (or a composite holding one), otherwise a Prometheus registry of the role's own added beside the given
 * one, so that meters land in both.
 *
 * <p>Counters and timers stay in the registry when the role stops; the gauges, which read the stopped role's
 * state, are removed by {@link #close()}. Safe to use from any thread.
 */
public final class RoleMetrics implements AutoCloseable {
    /** The Prometheus text format's content type, as {@code GET /metrics} answers it. */
    public static final String CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

    /**
     * The timers' histogram buckets, 10 µs to 2 min: 21 series per timer, fine enough for a wait's detection
     * lag (tens of microseconds), a transfer's few milliseconds and the 30 s timeouts.
     */
    public static final Duration[] BUCKETS = buckets();

    private final MeterRegistry registry;
    private final PrometheusMeterRegistry scraped;
    private final Tags tags;
    private final List<Meter> gauges = new CopyOnWriteArrayList<>();

    private RoleMetrics(MeterRegistry registry, PrometheusMeterRegistry scraped, Tags tags) {
        this.registry = registry;
        this.scraped = scraped;
        this.tags = tags;
    }

    /**
     * The meters of role {@code role} in {@code given}, or in a new {@link PrometheusMeterRegistry} when
     * {@code given} is null.
     */
    public static RoleMetrics of(MeterRegistry given, String role) {
        Tags tags = Tags.of("role", Objects.requireNonNull(role, "role"));
        if (given == null) {
            PrometheusMeterRegistry own = newRegistry();
            return new RoleMetrics(own, own, tags);
        }
        if (given instanceof PrometheusMeterRegistry prometheus) {
            return new RoleMetrics(given, prometheus, tags);
        }
        if (given instanceof CompositeMeterRegistry composite) {
            for (MeterRegistry child : composite.getRegistries()) {
                if (child instanceof PrometheusMeterRegistry prometheus) {
                    return new RoleMetrics(given, prometheus, tags);
                }
            }
        }
        PrometheusMeterRegistry own = newRegistry();
        return new RoleMetrics(new CompositeMeterRegistry().add(given).add(own), own, tags);
    }

    /**
     * A Prometheus registry as a role makes its own: every {@code kvflux.*} timer in it publishes the histogram
     * over {@link #BUCKETS} (the wait recorder's too, instead of Micrometer's finer percentile histogram).
     */
    public static PrometheusMeterRegistry newRegistry() {
        PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
        double[] slos = new double[BUCKETS.length];
        for (int i = 0; i < slos.length; i++) {
            slos[i] = BUCKETS[i].toNanos();
        }
        registry.config().meterFilter(new MeterFilter() {
            @Override
            public DistributionStatisticConfig configure(Meter.Id id, DistributionStatisticConfig config) {
                if (id.getType() != Meter.Type.TIMER || !id.getName().startsWith("kvflux.")) {
                    return config;
                }
                return DistributionStatisticConfig.builder().percentilesHistogram(false).serviceLevelObjectives(slos)
                        .build().merge(config);
            }
        });
        return registry;
    }

    /** Where the role's meters are registered. */
    public MeterRegistry registry() {
        return registry;
    }

    /** The tags every meter of the role carries: {@code role}. */
    public Tags tags() {
        return tags;
    }

    /** A counter named {@code name} with the role's tags and {@code tagKeyValues}. */
    public Counter counter(String name, String help, String... tagKeyValues) {
        return Counter.builder(name).description(help).tags(tags).tags(tagKeyValues).register(registry);
    }

    /**
     * A timer named {@code name} with the role's tags and {@code tagKeyValues}, publishing a histogram over
     * {@link #BUCKETS} (so that quantiles can be computed over instances).
     */
    public Timer timer(String name, String help, String... tagKeyValues) {
        return Timer.builder(name).description(help).tags(tags).tags(tagKeyValues).serviceLevelObjectives(BUCKETS)
                .register(registry);
    }

    /**
     * A distribution summary named {@code name} with the role's tags and {@code tagKeyValues}, publishing a histogram
     * over {@code buckets}.
     */
    public DistributionSummary summary(String name, String help, double[] buckets, String... tagKeyValues) {
        return DistributionSummary.builder(name).description(help).tags(tags).tags(tagKeyValues)
                .serviceLevelObjectives(buckets).register(registry);
    }

    /** A gauge reading {@code value} of {@code of}, removed at {@link #close()}. */
    public <T> void gauge(String name, String help, T of, ToDoubleFunction<T> value, String... tagKeyValues) {
        gauges.add(Gauge.builder(name, of, value).description(help).tags(tags).tags(tagKeyValues).strongReference(true)
                .register(registry));
    }

    /** A gauge of a time in seconds (exported with the unit in its name), removed at {@link #close()}. */
    public <T> void secondsGauge(String name, String help, T of, ToDoubleFunction<T> seconds) {
        gauges.add(Gauge.builder(name, of, seconds).description(help).tags(tags).baseUnit("seconds")
                .strongReference(true).register(registry));
    }

    /** A counter reading a count kept elsewhere ({@code count} of {@code of}), removed at {@link #close()}. */
    public <T> void functionCounter(String name, String help, T of, ToDoubleFunction<T> count,
            String... tagKeyValues) {
        gauges.add(FunctionCounter.builder(name, of, count).description(help).tags(tags).tags(tagKeyValues)
                .register(registry));
    }

    /** The sum of the counts of every timer named {@code name} with the role's tags and {@code tagKeyValues}. */
    public long timerCount(String name, String... tagKeyValues) {
        return registry.find(name).tags(tags).tags(tagKeyValues).timers().stream().mapToLong(Timer::count).sum();
    }

    private static Duration[] buckets() {
        long[] micros = {10, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000,
            500_000, 1_000_000, 2_500_000, 5_000_000, 10_000_000, 30_000_000, 60_000_000, 120_000_000};
        Duration[] buckets = new Duration[micros.length];
        for (int i = 0; i < micros.length; i++) {
            buckets[i] = Duration.ofNanos(micros[i] * 1_000);
        }
        return buckets;
    }

    /** Every meter of the registry as Prometheus text. */
    public String scrape() {
        return scraped.scrape();
    }

    /** Answers {@code GET /metrics}: 200 with {@link #scrape()} as {@link #CONTENT_TYPE}. */
    public Publisher<Void> serve(HttpServerResponse response) {
        return response.header(HttpHeaderNames.CONTENT_TYPE, CONTENT_TYPE)
                .sendString(Mono.fromSupplier(this::scrape), StandardCharsets.UTF_8);
    }

    /** Removes the role's gauges and function counters: they read state of a role that has stopped. */
    @Override
    public void close() {
        for (Meter gauge : gauges) {
            registry.remove(gauge);
        }
        gauges.clear();
    }
}
