package dev.kvflux.pipeline.proxy;

import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;

/**
 * The proxy's list of live instances. Each instance pings with its registration; one that has not pinged
 * for the time-to-live is dropped. Picks are round-robin per role among the live ones. Time is read from
 * the registry's scheduler ({@link Schedulers#parallel()} unless set), so virtual time drives expiry.
 * Thread-safe.
 */
public final class InstanceRegistry {
    private static final Logger LOG = LoggerFactory.getLogger(InstanceRegistry.class);

    private final Duration ttl;
    private final Scheduler clock;
    private final Map<Instance, Long> lastSeen = new LinkedHashMap<>();
    private final AtomicLong turns = new AtomicLong();

    /** A registry that drops instances {@code ttl} after their last ping, on {@link Schedulers#parallel()}'s clock. */
    public InstanceRegistry(Duration ttl) {
        this(ttl, Schedulers.parallel());
    }

    public InstanceRegistry(Duration ttl, Scheduler clock) {
        Objects.requireNonNull(ttl, "ttl");
        if (ttl.isNegative() || ttl.isZero()) {
            throw new IllegalArgumentException("instance time-to-live must be positive, got " + ttl);
        }
        this.ttl = ttl;
        this.clock = Objects.requireNonNull(clock, "clock");
    }

    /** Records a ping from {@code instance}: registers it, or keeps it alive. */
    public synchronized void ping(Instance instance) {
        if (lastSeen.put(Objects.requireNonNull(instance, "instance"), now()) == null) {
            LOG.info("registered {} instance http={} notify={}", instance.role().wireName(),
                    Instance.hostPort(instance.httpAddress()), Instance.hostPort(instance.notifyAddress()));
        }
    }

    /** The live instances of {@code role}, in registration order. */
    public synchronized List<Instance> live(Role role) {
        expire();
        List<Instance> live = new ArrayList<>();
        for (Instance instance : lastSeen.keySet()) {
            if (instance.role() == role) {
                live.add(instance);
            }
        }
        return live;
    }

    /** The next live instance of {@code role}, round-robin; empty if none is live. */
    public Optional<Instance> pick(Role role) {
        List<Instance> live = live(role);
        if (live.isEmpty()) {
            return Optional.empty();
        }
        return Optional.of(live.get(Math.floorMod(turns.getAndIncrement(), live.size())));
    }

    private void expire() {
        long now = now();
        lastSeen.entrySet().removeIf(entry -> {
            boolean stale = now - entry.getValue() > ttl.toNanos();
            if (stale) {
                LOG.warn("dropped {} instance {}: no ping for {} ms", entry.getKey().role().wireName(),
                        Instance.hostPort(entry.getKey().httpAddress()), ttl.toMillis());
            }
            return stale;
        });
    }

    private long now() {
        return clock.now(TimeUnit.NANOSECONDS);
    }
}
