package dev.kvflux.serving.proxy;

import dev.kvflux.bindings.DurationText;
import dev.kvflux.serving.api.Instance;
import dev.kvflux.serving.api.Role;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;

/**
 * The proxy's list of live instances. Each instance pings with its registration; one that has not pinged
 * for the time-to-live is dropped. An instance a membership store vouches for (etcd, through {@link #hold}) is kept
 * whatever its pings until it is {@link #remove removed}: the store, not the ping TTL, says when it is gone, so the
 * last members known stay listed while the store is unreachable. Picks are round-robin per role among the live ones. Time is read from
 * the registry's scheduler ({@link Schedulers#parallel()} unless set), so virtual time drives expiry.
 *
 * <p>At most {@code maxPerRole} instances of each role are held ({@link #DEFAULT_MAX_PER_ROLE} unless set): a
 * new instance beyond that is refused ({@link Outcome#FULL}) while the live ones keep their places and their
 * pings, so a flood of registrations can neither evict a live instance nor grow the registry; a place frees
 * when an instance stops pinging. A signed registration no newer than the last one accepted for the same
 * instance is refused as a replay ({@link Outcome#REPLAYED}). Thread-safe.
 */
public final class InstanceRegistry {
    private static final Logger LOG = LoggerFactory.getLogger(InstanceRegistry.class);

    /** The most instances of one role held by default. */
    public static final int DEFAULT_MAX_PER_ROLE = 64;
    /** The most instances of one role that can be allowed. */
    public static final int MAX_PER_ROLE_LIMIT = 65_536;

    /** What became of a registration. */
    public enum Outcome {
        /** A new instance, now live. */
        REGISTERED,
        /** A live instance, kept alive. */
        REFRESHED,
        /** A new instance refused: its role already has the most instances allowed. */
        FULL,
        /** A signed registration no newer than the instance's last one: refused as a replay. */
        REPLAYED,
        /**
         * Refused: it claims the HTTP or the notify address of another live instance without being that instance
         * (another role, or the other address differs), as a hijack would; counted.
         */
        CLAIMED
    }

    private final Duration ttl;
    private final Scheduler clock;
    private final int maxPerRole;
    private final Map<Instance, Seen> lastSeen = new LinkedHashMap<>();
    /** Each role's round-robin turn: one counter per role, so that picking a prefill never moves the decodes' turn. */
    private final java.util.EnumMap<Role, AtomicLong> turns = new java.util.EnumMap<>(Map.of(Role.PREFILL,
            new AtomicLong(), Role.DECODE, new AtomicLong()));
    private final AtomicLong refusedFull = new AtomicLong();
    private final AtomicLong refusedClaims = new AtomicLong();
    private final AtomicLong impostors = new AtomicLong();
    /** Told of every instance that leaves: expired or removed. */
    private final List<Consumer<Instance>> dropListeners = new CopyOnWriteArrayList<>();
    /** When the last "refused, full" warning was logged (the registry's clock), and refusals since; guarded by this. */
    private long lastFullWarning = Long.MIN_VALUE;
    private long refusedSinceWarning;

    /** Refusals of a full role are logged at most this often, each line with the count since the last. */
    private static final Duration FULL_WARNING_EVERY = Duration.ofSeconds(10);

    /**
     * When an instance was last seen (the registry's clock), its last signing time if signed, the incarnation
     * it registered with (0 when it did not say): the instance's identity, new at each of its starts, and whether a
     * membership store holds it (then it does not expire).
     */
    private record Seen(long atNanos, long signedAtMillis, long incarnation, boolean held) {
    }

    /** A registry that drops instances {@code ttl} after their last ping, on {@link Schedulers#parallel()}'s clock. */
    public InstanceRegistry(Duration ttl) {
        this(ttl, Schedulers.parallel());
    }

    public InstanceRegistry(Duration ttl, Scheduler clock) {
        this(ttl, clock, DEFAULT_MAX_PER_ROLE);
    }

    /**
     * A registry holding at most {@code maxPerRole} instances of each role.
     *
     * @throws IllegalArgumentException if {@code ttl} is not positive or {@code maxPerRole} is outside 1 to
     *     {@value #MAX_PER_ROLE_LIMIT}
     */
    public InstanceRegistry(Duration ttl, Scheduler clock, int maxPerRole) {
        Objects.requireNonNull(ttl, "ttl");
        if (ttl.isNegative() || ttl.isZero()) {
            throw new IllegalArgumentException("instance time-to-live must be positive, got " + DurationText.of(ttl));
        }
        if (maxPerRole < 1 || maxPerRole > MAX_PER_ROLE_LIMIT) {
            throw new IllegalArgumentException("the instance cap per role must be from 1 to " + MAX_PER_ROLE_LIMIT
                    + ", got " + maxPerRole);
        }
        this.ttl = ttl;
        this.clock = Objects.requireNonNull(clock, "clock");
        this.maxPerRole = maxPerRole;
    }

    /** The most instances of one role held at once. */
    public int maxPerRole() {
        return maxPerRole;
    }

    /**
     * Tells {@code listener} of every instance that leaves the registry (its pings stopped, or it was removed), on the
     * thread that noticed, while the registry is locked: keep it short.
     *
     * @return what stops telling it
     */
    public Runnable onDropped(Consumer<Instance> listener) {
        Objects.requireNonNull(listener, "listener");
        dropListeners.add(listener);
        return () -> dropListeners.remove(listener);
    }

    private void dropped(Instance instance) {
        for (Consumer<Instance> listener : dropListeners) {
            listener.accept(instance);
        }
    }

    /** New instances refused so far because their role was full. */
    public long refusedFull() {
        return refusedFull.get();
    }

    /** Registration refusals because they claimed another live instance's address. */
    public long refusedClaims() {
        return refusedClaims.get();
    }

    /** Records an unsigned ping from {@code instance}: registers it, keeps it alive, or refuses it when full. */
    public Outcome ping(Instance instance) {
        return ping(instance, Long.MIN_VALUE, 0);
    }

    /** As {@link #ping(Instance, long, long)} for an instance that names no incarnation. */
    public Outcome ping(Instance instance, long signedAtMillis) {
        return ping(instance, signedAtMillis, 0);
    }

    /**
     * Records a ping from {@code instance}, signed at {@code signedAtMillis} ({@link Long#MIN_VALUE} when unsigned)
     * by its incarnation {@code incarnation} (0: not said): registers it, keeps it alive, takes a newer incarnation
     * at the same addresses as the instance's restart, or refuses it as full, as a replay (no newer signature, or
     * an older incarnation), or as a claim on another live instance's address.
     */
    public Outcome ping(Instance instance, long signedAtMillis, long incarnation) {
        return register(instance, signedAtMillis, incarnation, false);
    }

    /**
     * Records {@code instance} as a membership store holds it (its record signed at {@code signedAtMillis},
     * {@link Long#MIN_VALUE} when unsigned, by incarnation {@code incarnation}), under the same rules as a
     * {@linkplain #ping(Instance, long, long) ping}: the cap, the replay and the claim rules. Once held it does not
     * expire by the time-to-live; only {@link #remove} drops it.
     */
    public Outcome hold(Instance instance, long signedAtMillis, long incarnation) {
        return register(instance, signedAtMillis, incarnation, true);
    }

    /**
     * Drops {@code instance} at once, as when its record left the membership store.
     *
     * @return whether it was registered
     */
    public synchronized boolean remove(Instance instance) {
        Objects.requireNonNull(instance, "instance");
        if (lastSeen.remove(instance) == null) {
            return false;
        }
        dropped(instance);
        LOG.info("removed {} instance http={}: its membership record is gone", instance.role().wireName(),
                Instance.hostPort(instance.httpAddress()));
        return true;
    }

    /** The incarnation {@code instance} registered with; 0 when it named none or is not registered. */
    public synchronized long incarnation(Instance instance) {
        Seen seen = lastSeen.get(instance);
        return seen == null ? 0 : seen.incarnation();
    }

    /**
     * Drops {@code instance}: another instance answers at its HTTP address ({@code why} says which), so its
     * registration only claims that address. The instance that holds it can then register; counted.
     *
     * @return whether it was registered
     */
    public synchronized boolean impostor(Instance instance, String why) {
        if (lastSeen.remove(instance) == null) {
            return false;
        }
        impostors.incrementAndGet();
        dropped(instance);
        LOG.warn("dropped {} instance http={} notify={}: {}; its registration only claimed that address",
                instance.role().wireName(), Instance.hostPort(instance.httpAddress()),
                Instance.hostPort(instance.notifyAddress()), why);
        return true;
    }

    /** Registrations dropped because another instance answered at their HTTP address. */
    public long impostors() {
        return impostors.get();
    }

    /** Whether a membership store holds {@code instance} ({@link #hold}). */
    public synchronized boolean held(Instance instance) {
        Seen seen = lastSeen.get(instance);
        return seen != null && seen.held();
    }

    private synchronized Outcome register(Instance instance, long signedAtMillis, long incarnation, boolean held) {
        Objects.requireNonNull(instance, "instance");
        expire();
        Seen before = lastSeen.get(instance);
        if (before != null) {
            if (signedAtMillis != Long.MIN_VALUE && signedAtMillis <= before.signedAtMillis()
                    || incarnation != 0 && incarnation < before.incarnation()) {
                return Outcome.REPLAYED;
            }
            if (incarnation != before.incarnation() && before.incarnation() != 0) {
                LOG.info("{} instance http={} restarted (incarnation {} -> {})", instance.role().wireName(),
                        Instance.hostPort(instance.httpAddress()), before.incarnation(), incarnation);
            }
            lastSeen.put(instance, new Seen(now(), signedAtMillis, incarnation, held || before.held()));
            return Outcome.REFRESHED;
        }
        Instance claimed = claimedBy(instance);
        if (claimed != null) {
            refusedClaims.incrementAndGet();
            LOG.warn("refused a {} registration http={} notify={}: instance http={} notify={} holds {}", instance.role()
                    .wireName(), Instance.hostPort(instance.httpAddress()), Instance.hostPort(instance.notifyAddress()),
                    Instance.hostPort(claimed.httpAddress()), Instance.hostPort(claimed.notifyAddress()),
                    claimed.httpAddress().equals(instance.httpAddress()) ? "that HTTP address" : "that notify address");
            return Outcome.CLAIMED;
        }
        if (count(instance.role()) >= maxPerRole) {
            refusedFull.incrementAndGet();
            refusedSinceWarning++;
            long now = now();
            if (lastFullWarning == Long.MIN_VALUE || now - lastFullWarning >= FULL_WARNING_EVERY.toNanos()) {
                LOG.warn("refused {} new instance(s), the last {} instance {}: {} are registered, the most allowed"
                        + " ({} refused in all; raise kvflux proxy --max-instances-per-role if these are real). At most"
                        + " one such line per {} s", refusedSinceWarning, instance.role().wireName(),
                        Instance.hostPort(instance.httpAddress()), maxPerRole, refusedFull.get(),
                        FULL_WARNING_EVERY.toSeconds());
                lastFullWarning = now;
                refusedSinceWarning = 0;
            }
            return Outcome.FULL;
        }
        lastSeen.put(instance, new Seen(now(), signedAtMillis, incarnation, held));
        LOG.info("registered {} instance http={} notify={}{}", instance.role().wireName(),
                Instance.hostPort(instance.httpAddress()), Instance.hostPort(instance.notifyAddress()),
                held ? " (from etcd)" : "");
        return Outcome.REGISTERED;
    }

    /** The live instances, other than {@code instance} itself, that hold one of its addresses. */
    public synchronized List<Instance> holders(Instance instance) {
        java.util.Set<java.net.InetSocketAddress> mine = addresses(instance);
        List<Instance> holders = new ArrayList<>();
        for (Instance other : lastSeen.keySet()) {
            if (!other.equals(instance) && addresses(other).stream().anyMatch(mine::contains)) {
                holders.add(other);
            }
        }
        return holders;
    }

    /** The live instance, other than {@code instance} itself, that holds one of its addresses; null if none. */
    private Instance claimedBy(Instance instance) {
        java.util.Set<java.net.InetSocketAddress> mine = addresses(instance);
        for (Instance other : lastSeen.keySet()) {
            if (!other.equals(instance) && addresses(other).stream().anyMatch(mine::contains)) {
                return other;
            }
        }
        return null;
    }

    /** Every address an instance listens on: HTTP and each rank's notify. */
    private static java.util.Set<java.net.InetSocketAddress> addresses(Instance instance) {
        java.util.Set<java.net.InetSocketAddress> all = new java.util.HashSet<>(instance.notifyRanks());
        all.add(instance.httpAddress());
        return all;
    }

    private int count(Role role) {
        int n = 0;
        for (Instance instance : lastSeen.keySet()) {
            if (instance.role() == role) {
                n++;
            }
        }
        return n;
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
        return pick(role, instance -> true);
    }

    /**
     * The next live instance of {@code role} that is {@code usable}, round-robin; when none is, the next live one
     * all the same (better a request on an instance that may have recovered than none at all); empty if none is
     * live.
     */
    public Optional<Instance> pick(Role role, java.util.function.Predicate<Instance> usable) {
        return pick(role, instance -> true, usable);
    }

    /**
     * As {@link #pick(Role, java.util.function.Predicate)} among the live instances of {@code role} that are
     * {@code of} a kind (kvflux's roles, or vLLM's instances): a request goes to a prefill and a decode of one kind.
     */
    public Optional<Instance> pick(Role role, java.util.function.Predicate<Instance> of,
            java.util.function.Predicate<Instance> usable) {
        List<Instance> live = live(role).stream().filter(of).toList();
        if (live.isEmpty()) {
            return Optional.empty();
        }
        List<Instance> healthy = live.stream().filter(usable).toList();
        List<Instance> from = healthy.isEmpty() ? live : healthy;
        return Optional.of(from.get(Math.floorMod(turns.get(role).getAndIncrement(), from.size())));
    }

    private void expire() {
        long now = now();
        lastSeen.entrySet().removeIf(entry -> {
            boolean stale = !entry.getValue().held() && now - entry.getValue().atNanos() > ttl.toNanos();
            if (stale) {
                LOG.warn("dropped {} instance {}: no ping for {} ms", entry.getKey().role().wireName(),
                        Instance.hostPort(entry.getKey().httpAddress()), ttl.toMillis());
                dropped(entry.getKey());
            }
            return stale;
        });
    }

    private long now() {
        return clock.now(TimeUnit.NANOSECONDS);
    }
}
