package dev.kvflux.serving.proxy;

import dev.kvflux.serving.api.Instance;
import java.time.Duration;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.LongSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.core.scheduler.Schedulers;

/**
 * Which registered instances earn traffic. An instance is ejected (not picked) when its health check fails
 * {@code probeFailures} times in a row, or when {@code requestFailures} requests in a row fail on it (refused or reset);
 * it comes back once a health check succeeds, and a request-ejected one is probed no sooner than {@code cooldown}
 * after its ejection. An instance that holds a registration but never answers (a blackhole) is so ejected within a
 * few health-check intervals.
 *
 * <p>An instance whose work stops while its {@code /health} still answers is ejected on its work path: its streams
 * stopped moving ({@link #stalled}), or a canary request through it failed ({@link #canaried}). Only a canary that
 * succeeds, no sooner than the cooldown, brings such an instance back ({@link #needsCanary}); its {@code /health}
 * does not. A request that merely ran past its deadline does not count against an instance: the proxy asks a canary
 * instead, so a healthy instance serving a long answer is never ejected for it. Thread-safe.
 */
public final class InstanceHealth {
    private static final Logger LOG = LoggerFactory.getLogger(InstanceHealth.class);

    /** Health-check failures in a row that eject an instance, by default. */
    public static final int DEFAULT_PROBE_FAILURES = 2;
    /** Failed requests in a row that eject an instance, by default. */
    public static final int DEFAULT_REQUEST_FAILURES = 3;
    /** How long a request-ejected instance waits before a health check may bring it back, by default. */
    public static final Duration DEFAULT_COOLDOWN = Duration.ofSeconds(5);

    private final int probeFailures;
    private final int requestFailures;
    private final long cooldownNanos;
    private final LongSupplier nanoClock;
    private final Map<Instance, State> states = new ConcurrentHashMap<>();
    /** For each instance that requests wait on, what tells them of its next ejection. */
    private final Map<Instance, Sinks.One<String>> ejections = new ConcurrentHashMap<>();

    private static final class State {
        int failedProbes;
        int failedRequests;
        boolean ejected;
        /** Ejected on its work path: only a canary that succeeds restores it. */
        boolean workPath;
        long ejectedAtNanos;
        long ejections;
    }

    /** What a canary request through an instance showed. */
    public enum Canary {
        /** It answered the canary whole, in time. */
        HEALTHY,
        /** It answered, but refused the canary (overloaded, say), or the canary failed elsewhere: nothing learnt. */
        INCONCLUSIVE,
        /** Its answer did not come, stopped, or its connection failed. */
        FAILED
    }

    public InstanceHealth(int probeFailures, int requestFailures, Duration cooldown, LongSupplier nanoClock) {
        if (probeFailures < 1 || requestFailures < 1) {
            throw new IllegalArgumentException("ejection needs at least one failure in a row, got " + probeFailures
                    + " health checks and " + requestFailures + " requests");
        }
        this.probeFailures = probeFailures;
        this.requestFailures = requestFailures;
        this.cooldownNanos = Objects.requireNonNull(cooldown, "cooldown").toNanos();
        this.nanoClock = nanoClock;
    }

    /** The defaults: 2 failed health checks or 3 failed requests in a row eject; 5 s before a probe may restore. */
    public static InstanceHealth defaults() {
        return new InstanceHealth(DEFAULT_PROBE_FAILURES, DEFAULT_REQUEST_FAILURES, DEFAULT_COOLDOWN, System::nanoTime);
    }

    /** Whether {@code instance} may be picked. */
    public boolean usable(Instance instance) {
        State state = states.get(instance);
        if (state == null) {
            return true;
        }
        synchronized (state) {
            return !state.ejected;
        }
    }

    /** A health check of {@code instance} answered ({@code ok}) or failed. */
    public void probed(Instance instance, boolean ok) {
        State state = states.computeIfAbsent(instance, i -> new State());
        synchronized (state) {
            if (ok) {
                state.failedProbes = 0;
                if (state.workPath) {
                    return; // its /health answering says nothing of the work that stopped
                }
                if (state.ejected && nanoClock.getAsLong() - state.ejectedAtNanos >= cooldownNanos
                        || state.ejected && state.failedRequests < requestFailures) {
                    state.ejected = false;
                    state.failedRequests = 0;
                    LOG.info("{} instance {} answers its health check again: it takes requests again",
                            instance.role().wireName(), instance.baseUrl());
                }
                return;
            }
            if (++state.failedProbes >= probeFailures && !state.ejected) {
                eject(instance, state, state.failedProbes + " health checks in a row failed");
            }
        }
    }

    /** A request on {@code instance} was answered ({@code ok}), or failed in a way the instance is to blame for. */
    public void requested(Instance instance, boolean ok) {
        if (ok) {
            State state = states.get(instance);
            if (state != null) {
                synchronized (state) {
                    state.failedRequests = 0;
                }
            }
            return;
        }
        State state = states.computeIfAbsent(instance, i -> new State());
        synchronized (state) {
            if (++state.failedRequests >= requestFailures && !state.ejected) {
                eject(instance, state, state.failedRequests + " requests in a row failed on it");
            }
        }
    }

    /**
     * Ejects {@code instance} on its work path: {@code why} says how its work stopped (its streams stopped moving while
     * others moved, or a canary through it failed). Only a canary that succeeds brings it back.
     */
    public void stalled(Instance instance, String why) {
        State state = states.computeIfAbsent(instance, i -> new State());
        synchronized (state) {
            if (state.ejected && state.workPath) {
                return;
            }
            state.workPath = true;
            if (state.ejected) {
                LOG.warn("{} instance {} stays ejected: {}; only a canary request through it brings it back",
                        instance.role().wireName(), instance.baseUrl(), why);
                return;
            }
            eject(instance, state, why + "; only a canary request through it brings it back");
        }
    }

    /** A canary request through {@code instance} ended as {@code outcome}. */
    public void canaried(Instance instance, Canary outcome) {
        if (outcome == Canary.FAILED) {
            stalled(instance, "a canary request through it got no whole answer in time");
            return;
        }
        if (outcome != Canary.HEALTHY) {
            return;
        }
        State state = states.get(instance);
        if (state == null) {
            return;
        }
        synchronized (state) {
            state.failedRequests = 0;
            if (state.ejected && nanoClock.getAsLong() - state.ejectedAtNanos >= cooldownNanos) {
                state.ejected = false;
                state.workPath = false;
                state.failedProbes = 0;
                LOG.info("{} instance {} answered a canary request whole: it takes requests again",
                        instance.role().wireName(), instance.baseUrl());
            }
        }
    }

    /** Whether {@code instance} is ejected on its work path and its cooldown has passed: a canary may restore it. */
    public boolean needsCanary(Instance instance) {
        State state = states.get(instance);
        if (state == null) {
            return false;
        }
        synchronized (state) {
            return state.ejected && state.workPath && nanoClock.getAsLong() - state.ejectedAtNanos >= cooldownNanos;
        }
    }

    private void eject(Instance instance, State state, String why) {
        state.ejected = true;
        state.ejectedAtNanos = nanoClock.getAsLong();
        state.ejections++;
        LOG.warn("ejected {} instance {}: {}{}", instance.role().wireName(), instance.baseUrl(), why,
                state.workPath ? "" : "; it gets no requests until a health check succeeds");
        Sinks.One<String> waiting = ejections.remove(instance);
        if (waiting != null) {
            // the waiting requests end (and answer their clients) off this lock and the health check's thread
            Schedulers.parallel().schedule(() -> waiting.tryEmitValue(why));
        }
    }

    /**
     * Emits why {@code instance} was ejected, at its next ejection (never, if it is not ejected again): a request
     * that still waits for that instance's answer can then end at once rather than at its timeout.
     */
    public Mono<String> nextEjection(Instance instance) {
        return ejections.computeIfAbsent(instance, i -> Sinks.one()).asMono();
    }

    /** Instances ejected now. */
    public long ejected() {
        return states.values().stream().filter(s -> {
            synchronized (s) {
                return s.ejected;
            }
        }).count();
    }

    /** Ejections so far, over every instance. */
    public long ejections() {
        return states.values().stream().mapToLong(s -> {
            synchronized (s) {
                return s.ejections;
            }
        }).sum();
    }

    /** Forgets an instance that left the registry. */
    public void forget(Instance instance) {
        states.remove(instance);
        Sinks.One<String> waiting = ejections.remove(instance);
        if (waiting != null) {
            waiting.tryEmitValue("it left the registry");
        }
    }
}
