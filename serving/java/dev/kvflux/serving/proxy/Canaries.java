package dev.kvflux.serving.proxy;

import dev.kvflux.serving.api.Instance;
import java.time.Duration;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.function.BiFunction;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;

/**
 * Canary requests: a small streamed completion through a decode (and any usable prefill), sent as a client's would
 * be, to learn whether the decode's work path answers when its {@code /health} says nothing of it. A canary is sent
 * when a decode is suspect (its streams went silent with no other decode to compare with, or a request on it ran past
 * its deadline) and when a decode ejected on its work path may come back; at most one is in flight per decode, and at
 * most one starts per decode every {@code minGap}. What it shows goes to {@link InstanceHealth#canaried}; a failed one
 * also ends the decode's silent streams ({@link StreamWatch#failed}). Thread-safe.
 */
final class Canaries {
    private static final Logger LOG = LoggerFactory.getLogger(ProxyServer.class);

    private final InstanceHealth health;
    private final Duration timeout;
    private final long minGapNanos;
    private final Scheduler clock;
    private final BiFunction<Instance, Duration, Mono<InstanceHealth.Canary>> send;
    private final Map<Instance, Long> lastStarted = new ConcurrentHashMap<>();
    private final Map<Instance, Boolean> inFlight = new ConcurrentHashMap<>();
    private volatile StreamWatch watch;
    private final java.util.concurrent.atomic.AtomicLong sent = new java.util.concurrent.atomic.AtomicLong();
    private final java.util.concurrent.atomic.AtomicLong failedCount = new java.util.concurrent.atomic.AtomicLong();

    /**
     * @param timeout how long a canary may take to be answered whole
     * @param send sends one canary through a decode within a time, emitting what it showed
     */
    Canaries(InstanceHealth health, Duration timeout, Duration minGap, Scheduler clock,
            BiFunction<Instance, Duration, Mono<InstanceHealth.Canary>> send) {
        this.health = Objects.requireNonNull(health, "health");
        this.timeout = timeout;
        this.minGapNanos = minGap.toNanos();
        this.clock = clock;
        this.send = send;
    }

    /** The stream watch whose silent streams a failed canary ends. */
    void watch(StreamWatch watch) {
        this.watch = watch;
    }

    /** Sends a canary through {@code decode} unless one is in flight or started within the gap. */
    void suspect(Instance decode) {
        long now = clock.now(TimeUnit.NANOSECONDS);
        Long last = lastStarted.get(decode);
        if (last != null && now - last < minGapNanos || inFlight.putIfAbsent(decode, Boolean.TRUE) != null) {
            return;
        }
        lastStarted.put(decode, now);
        sent.incrementAndGet();
        send.apply(decode, timeout)
                .timeout(timeout.plusMillis(100), Mono.just(InstanceHealth.Canary.FAILED))
                .onErrorReturn(InstanceHealth.Canary.FAILED)
                .defaultIfEmpty(InstanceHealth.Canary.INCONCLUSIVE)
                .doFinally(signal -> inFlight.remove(decode))
                .subscribe(outcome -> {
                    if (outcome == InstanceHealth.Canary.FAILED) {
                        failedCount.incrementAndGet();
                        LOG.warn("decode instance {}: a canary request through it got no whole answer within {} ms",
                                decode.baseUrl(), timeout.toMillis());
                        StreamWatch streams = watch;
                        if (streams != null) {
                            streams.failed(decode, "a canary request through it got no whole answer within "
                                    + timeout.toMillis() + " ms");
                        } else {
                            health.canaried(decode, outcome);
                        }
                    } else {
                        health.canaried(decode, outcome);
                    }
                });
    }

    /** Forgets a decode that left the registry. */
    void forget(Instance decode) {
        lastStarted.remove(decode);
    }

    /** Canaries sent so far. */
    long sent() {
        return sent.get();
    }

    /** Canaries that failed so far. */
    long failed() {
        return failedCount.get();
    }
}
