package dev.kvflux.serving.proxy;

import dev.kvflux.serving.api.Instance;
import dev.kvflux.serving.api.Role;
import dev.kvflux.serving.vllm.VllmRegistration;
import dev.kvflux.transfer.KvMode;
import java.net.InetSocketAddress;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The vLLM instances among the proxy's members: each registration ({@link VllmRegistration}) becomes an
 * {@link Instance} of the proxy's registry (its HTTP address, and its ZeroMQ host with its notify base port), so
 * that vLLM instances expire, are health-checked, ejected and listed as every member is, and this table keeps what
 * routing them needs (ZeroMQ address, DP and TP sizes). A registration sharing its HTTP or ZeroMQ notify address with
 * another vLLM registration is that instance restarted (on other ports, or with other ones): it replaces the old one at
 * once, where vLLM's proxy keeps an instance that moved to another HTTP port listed for ever. Nothing in a vLLM
 * registration can be authenticated: its networks are the bound (--vllm-allow).
 *
 * <p>The first vLLM registration fixes the vLLM instances' transfer mode; one of the other mode is refused and
 * counted, since a READ prefill and a WRITE decode cannot move KV between them. kvflux's own roles are routed
 * separately: a request goes to a pair of one kind. Thread-safe.
 */
public final class VllmInstances {
    private static final Logger LOG = LoggerFactory.getLogger(VllmInstances.class);

    /** What became of a registration. */
    public enum Outcome { REGISTERED, REFRESHED, REPLACED, MODE_MISMATCH, FULL, CLAIMED }

    private final InstanceRegistry registry;
    private final Map<Instance, VllmRegistration> byInstance = new ConcurrentHashMap<>();
    private final AtomicReference<KvMode> mode = new AtomicReference<>();
    private final AtomicLong requests = new AtomicLong();
    private final AtomicLong modeMismatches = new AtomicLong();

    /** vLLM instances held in {@code registry}, which they expire from as any member does. */
    public VllmInstances(InstanceRegistry registry) {
        this.registry = Objects.requireNonNull(registry, "registry");
        registry.onDropped(byInstance::remove);
    }

    /** The member a registration becomes. */
    public static Instance instance(VllmRegistration registration) {
        InetSocketAddress notify = InetSocketAddress.createUnresolved(registration.zmqHost(),
                registration.notifyPort());
        return new Instance(registration.role(), registration.http(), notify, List.of(notify));
    }

    /** Takes a registration: registers the instance, keeps it alive, or replaces its previous life. */
    public synchronized Outcome register(VllmRegistration registration) {
        KvMode fixed = mode.updateAndGet(m -> m == null ? registration.mode() : m);
        if (fixed != registration.mode()) {
            long n = modeMismatches.incrementAndGet();
            if (n == 1 || n % 1000 == 0) {
                LOG.warn("refused vLLM {}: its transfer mode is {} and the vLLM instances here run {} ({} refused so"
                        + " far)", registration, registration.mode().wireName(), fixed.wireName(), n);
            }
            return Outcome.MODE_MISMATCH;
        }
        Instance instance = instance(registration);
        boolean replaced = false;
        for (Instance holder : registry.holders(instance)) {
            VllmRegistration before = byInstance.get(holder);
            if (before != null) {
                registry.remove(holder);
                byInstance.remove(holder);
                replaced = true;
                LOG.info("vLLM instance http={} zmq {} replaces http={} zmq {}: the same instance, restarted",
                        registration.httpHostPort(), registration.zmqAddress(), before.httpHostPort(),
                        before.zmqAddress());
            }
        }
        InstanceRegistry.Outcome outcome = registry.ping(instance);
        switch (outcome) {
            case REGISTERED, REFRESHED -> byInstance.put(instance, registration);
            default -> {
                return outcome == InstanceRegistry.Outcome.FULL ? Outcome.FULL : Outcome.CLAIMED;
            }
        }
        return replaced ? Outcome.REPLACED : outcome == InstanceRegistry.Outcome.REGISTERED ? Outcome.REGISTERED
                : Outcome.REFRESHED;
    }

    /** The registration behind {@code instance}, or null when it is not a vLLM instance. */
    public VllmRegistration registration(Instance instance) {
        return byInstance.get(instance);
    }

    /** Whether {@code instance} is a vLLM instance. */
    public boolean isVllm(Instance instance) {
        return byInstance.containsKey(instance);
    }

    /** The vLLM instances' transfer mode, fixed by the first registration; null before it. */
    public KvMode mode() {
        return mode.get();
    }

    /** Counts one more request routed to vLLM instances and returns its number, from 1. */
    public long nextRequest() {
        return requests.incrementAndGet();
    }

    /** Registrations refused for another transfer mode. */
    public long modeMismatches() {
        return modeMismatches.get();
    }
}
