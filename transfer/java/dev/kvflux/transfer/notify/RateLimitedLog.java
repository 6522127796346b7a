package dev.kvflux.transfer.notify;

import java.time.Duration;
import java.util.EnumMap;
import java.util.Map;
import java.util.StringJoiner;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import reactor.core.Disposable;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;

/**
 * Warnings about peers' frames at a bounded rate: per kind, the first in each period is logged and the rest
 * are counted; every period, a single line sums up what was counted and not logged. A flood of bad frames
 * thus writes at most one line per kind and one summary per period, whatever its rate. Thread-safe.
 */
final class RateLimitedLog implements AutoCloseable {
    /** What went wrong with a frame or a connection; the {@link NotifyEvent}s reported match. */
    enum Kind { MALFORMED, OVERSIZED, UNAUTHENTICATED, INVALID_UTF8, INTERNAL_ERROR, REJECTED_CONNECTION }

    static final Duration DEFAULT_PERIOD = Duration.ofSeconds(10);

    private final Logger log;
    private final long periodMillis;
    private final Scheduler clock;
    private final Map<Kind, Long> lastLogged = new EnumMap<>(Kind.class);
    private final Map<Kind, Long> suppressed = new EnumMap<>(Kind.class);
    private final Disposable summaries;

    /** Logs to {@code log}; summaries every {@code period} on {@code clock}'s workers. */
    RateLimitedLog(Logger log, Duration period, Scheduler clock) {
        this.log = log;
        this.periodMillis = period.toMillis();
        this.clock = clock != null ? clock : Schedulers.parallel();
        this.summaries = this.clock.schedulePeriodically(this::summarise, periodMillis, periodMillis,
                TimeUnit.MILLISECONDS);
    }

    /** Logs {@code message} at warn unless a {@code kind} was logged within the period; counts it then. */
    void warn(Kind kind, String message) {
        long now = clock.now(TimeUnit.MILLISECONDS);
        synchronized (this) {
            Long last = lastLogged.get(kind);
            if (last != null && now - last < periodMillis) {
                suppressed.merge(kind, 1L, Long::sum);
                return;
            }
            lastLogged.put(kind, now);
        }
        log.warn("{}. Further ones within {} s are counted and summed up", message, periodMillis / 1000.0);
    }

    /** Logs one line with what was counted and not logged since the last summary, if anything was. */
    void summarise() {
        StringJoiner counts = new StringJoiner(", ");
        long total = 0;
        synchronized (this) {
            for (Map.Entry<Kind, Long> e : suppressed.entrySet()) {
                counts.add(e.getKey().name().toLowerCase(java.util.Locale.ROOT) + "=" + e.getValue());
                total += e.getValue();
            }
            suppressed.clear();
        }
        if (total > 0) {
            log.warn("notify: {} more rejected frames or connections in the last {} s were not logged ({});"
                    + " each is also reported to the notify recorder", total, periodMillis / 1000.0, counts);
        }
    }

    @Override
    public void close() {
        summaries.dispose();
        summarise();
    }
}
