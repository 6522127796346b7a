package dev.kvflux.serving.proxy;

import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvflux.serving.api.Instance;
import dev.kvflux.serving.api.MemberRecord;
import dev.kvflux.serving.api.RegistrationAuth;
import dev.kvflux.serving.etcd.EtcdClient;
import dev.kvflux.serving.etcd.EtcdDiscovery;
import dev.kvflux.serving.etcd.EtcdException;
import dev.kvflux.serving.http.HttpJson;
import dev.kvflux.transfer.notify.LogText;
import java.time.Duration;
import java.time.Instant;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.Disposable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.core.scheduler.Schedulers;
import reactor.util.retry.Retry;

/**
 * The proxy's view of a cluster's membership in etcd, fed into its {@link InstanceRegistry}: it reads every record
 * under the cluster's prefix ({@link MemberRecord}), then watches the prefix from the read's revision on. A record
 * put is {@linkplain InstanceRegistry#hold held} (under the registry's cap, claim and replay rules), a record deleted
 * (its instance's lease ended, or the instance left) is {@linkplain InstanceRegistry#remove removed}. With a notify
 * secret only records signed with it are taken, and a record that arrives by the watch must have been signed within
 * the secret's max age; a refused record is counted by reason and logged (the first of each reason at warn).
 *
 * <p>While the watch runs, etcd is asked for its status every {@code heartbeat}, so a hung etcd is noticed as well as
 * a closed one. When etcd cannot be reached, the proxy keeps routing to the members it last knew, says so
 * ({@link #connected()}, {@link #describe()}) and tries again (100 ms, doubling to 1 s); once back it reads the prefix
 * anew, so that what changed meanwhile (instances gone, instances new) is applied. Thread-safe.
 */
final class EtcdMembers implements Disposable {
    /** The proxy's own logger: its lines read as the proxy's. */
    private static final Logger LOG = LoggerFactory.getLogger(ProxyServer.class);

    /** How often etcd's status is checked while the watch runs, by default. */
    static final Duration DEFAULT_HEARTBEAT = Duration.ofSeconds(1);
    /** The longest line of the watch read: a batch of events, each a record of at most 4 KiB in base64. */
    static final int MAX_WATCH_LINE_BYTES = 4 << 20;
    private static final Duration FIRST_BACKOFF = Duration.ofMillis(100);
    private static final Duration MAX_BACKOFF = Duration.ofSeconds(1);

    private final EtcdClient etcd;
    private final String cluster;
    private final String prefix;
    private final InstanceRegistry registry;
    private final RegistrationAuth auth;
    private final int maxRecords;
    private final int maxRangeBytes;
    private final Duration heartbeat;
    /** The records taken, by key, each with its instance and the revision it was put at; guarded by this. */
    private final Map<String, Held> byKey = new HashMap<>();
    private final Map<String, AtomicLong> refused = new ConcurrentHashMap<>();
    private final Set<String> warnedReasons = ConcurrentHashMap.newKeySet();
    private final AtomicLong reads = new AtomicLong();
    private final Sinks.One<Boolean> firstRead = Sinks.one();
    private volatile State state;
    private Disposable loop;

    private record Held(Instance instance, long modRevision) {
    }

    /** Whether etcd is reachable, since when (wall clock), and the last problem when it is not. */
    private record State(boolean connected, long sinceMillis, String problem) {
    }

    private EtcdMembers(EtcdClient etcd, String cluster, InstanceRegistry registry, RegistrationAuth auth,
            Duration heartbeat) {
        this.etcd = etcd;
        this.cluster = EtcdDiscovery.checkCluster(cluster);
        this.prefix = MemberRecord.prefix(cluster);
        this.registry = registry;
        this.auth = auth;
        // both roles at the cap, with room for restarted instances' records that have not expired yet
        this.maxRecords = 4 * registry.maxPerRole() + 16;
        this.maxRangeBytes = maxRecords * (MemberRecord.MAX_BYTES * 4 / 3 + MemberRecord.MAX_KEY_BYTES * 4 / 3 + 512)
                + 4096;
        this.heartbeat = heartbeat;
        this.state = new State(false, System.currentTimeMillis(), "not read yet");
    }

    /**
     * Starts reading and watching {@code cluster}'s records in {@code etcd} into {@code registry}, checking their
     * signatures with {@code auth} unless it is {@code null}.
     */
    static EtcdMembers start(EtcdClient etcd, String cluster, InstanceRegistry registry, RegistrationAuth auth,
            Duration heartbeat) {
        EtcdMembers members = new EtcdMembers(etcd, cluster, registry, auth, heartbeat);
        members.loop = Flux.defer(members::session)
                .retryWhen(Retry.backoff(Long.MAX_VALUE, FIRST_BACKOFF).maxBackoff(MAX_BACKOFF).transientErrors(true)
                        .doBeforeRetry(signal -> members.lost(signal.failure())))
                .subscribe();
        return members;
    }

    /** Emits once the first read of the prefix has succeeded ({@code true}) or failed ({@code false}). */
    Mono<Boolean> firstRead() {
        return firstRead.asMono();
    }

    /** Whether etcd answers and the watch runs. */
    boolean connected() {
        return state.connected();
    }

    /** Reads of the whole prefix so far: the first, then one per reconnection. */
    long reads() {
        return reads.get();
    }

    /** Records refused so far for {@code reason}. */
    long refused(String reason) {
        AtomicLong count = refused.get(reason);
        return count == null ? 0 : count.get();
    }

    /** The membership as {@code GET /health} shows it. */
    ObjectNode describe() {
        State now = state;
        ObjectNode json = HttpJson.MAPPER.createObjectNode().put("source", "etcd").put("cluster", cluster)
                .put("endpoints", etcd.endpointsText()).put("connected", now.connected())
                .put("since", Instant.ofEpochMilli(now.sinceMillis()).toString());
        synchronized (this) {
            json.put("records", byKey.size());
        }
        if (!now.connected()) {
            json.put("problem", now.problem());
        }
        return json;
    }

    /** One connection's life: read the prefix, then watch it until the watch or a heartbeat fails. */
    private Flux<Object> session() {
        return etcd.range(prefix, maxRecords, maxRangeBytes)
                .doOnError(e -> firstRead.tryEmitValue(false))
                .flatMapMany(range -> {
                    applyRead(range);
                    firstRead.tryEmitValue(true);
                    // the watch always ends in an error, so that the session is retried; a failed heartbeat ends it too
                    Flux<Object> watch = etcd.watch(prefix, range.revision() + 1, MAX_WATCH_LINE_BYTES)
                            .<Object>map(response -> {
                                apply(response);
                                return response;
                            })
                            .concatWith(Mono.error(WatchEndedException::new));
                    Flux<Object> heartbeats = Flux.interval(heartbeat, heartbeat, Schedulers.parallel())
                            .onBackpressureDrop()
                            .concatMap(tick -> etcd.status(), 1)
                            .ignoreElements()
                            .flux()
                            .cast(Object.class);
                    return Flux.merge(watch, heartbeats);
                });
    }

    /** etcd closed or cancelled the watch; the proxy reads the prefix again. */
    private static final class WatchEndedException extends RuntimeException {
        WatchEndedException() {
            super("etcd ended the watch", null, false, false);
        }
    }

    private void lost(Throwable failure) {
        String problem = LogText.escape(failure.getMessage() != null ? failure.getMessage() : failure.toString());
        State before = state;
        if (before.connected()) {
            int members;
            synchronized (this) {
                members = byKey.size();
            }
            LOG.warn("lost etcd's membership of cluster {} ({}): {}; routing to the {} member(s) last known until it is"
                    + " back", cluster, etcd.endpointsText(), problem, members);
            state = new State(false, System.currentTimeMillis(), problem);
        } else {
            if (reads.get() == 0 && warnedReasons.add("first_read")) {
                LOG.warn("cannot read cluster {}'s membership from etcd ({}) yet: {}; retrying", cluster,
                        etcd.endpointsText(), problem);
            }
            state = new State(false, before.sinceMillis(), problem);
        }
    }

    /** Applies a whole read of the prefix: every record in it, and the removal of those no longer in it. */
    private void applyRead(EtcdClient.Range range) {
        reads.incrementAndGet();
        if (range.more()) {
            warnOnce("truncated", "cluster " + cluster + " holds more than the " + maxRecords + " records read; the"
                    + " rest are ignored (raise kvflux proxy --max-instances-per-role if these are real)");
        }
        Set<String> seen = new HashSet<>();
        int taken;
        synchronized (this) {
            for (EtcdClient.KeyValue kv : range.kvs()) {
                seen.add(kv.key());
                put(kv, false);
            }
            for (String key : Set.copyOf(byKey.keySet())) {
                if (!seen.contains(key)) {
                    delete(key);
                }
            }
            taken = byKey.size();
        }
        State before = state;
        if (!before.connected()) {
            LOG.info("{} cluster {}'s membership from etcd ({}): {} record(s) taken at revision {}",
                    reads.get() == 1 ? "read" : "etcd is back: read again", cluster,
                    etcd.endpointsText(), taken, range.revision());
            state = new State(true, System.currentTimeMillis(), "");
        }
    }

    private void apply(EtcdClient.WatchResponse response) {
        if (response instanceof EtcdClient.WatchResponse.Events events) {
            synchronized (this) {
                for (EtcdClient.Event event : events.events()) {
                    if (event.delete()) {
                        delete(event.kv().key());
                    } else {
                        put(event.kv(), true);
                    }
                }
            }
        } else if (response instanceof EtcdClient.WatchResponse.Canceled canceled) {
            LOG.info("etcd cancelled the watch of cluster {} ({}); reading it again", cluster,
                    canceled.compactRevision() > 0 ? "revision compacted to " + canceled.compactRevision()
                            : canceled.reason());
        }
    }

    /** Takes a record put; {@code justPut} when it came by the watch, so its signature must be fresh. Holds this. */
    private void put(EtcdClient.KeyValue kv, boolean justPut) {
        Held before = byKey.get(kv.key());
        if (before != null && before.modRevision() == kv.modRevision()) {
            return; // read again unchanged
        }
        MemberRecord.Accepted accepted;
        try {
            accepted = MemberRecord.read(cluster, kv.key(), kv.value(), kv.lease(), auth, justPut);
        } catch (MemberRecord.RefusedException e) {
            refuse(e.reason(), e.getMessage());
            return;
        }
        Instance instance = accepted.record().instance();
        InstanceRegistry.Outcome outcome = registry.hold(instance, accepted.signedAtMillis(),
                accepted.record().incarnation());
        switch (outcome) {
            case REGISTERED, REFRESHED -> {
                byKey.put(kv.key(), new Held(instance, kv.modRevision()));
                if (before != null && !before.instance().equals(instance)) {
                    release(before.instance());
                }
            }
            case FULL -> refuse("instance_cap", "record " + LogText.escape(kv.key()) + ": "
                    + instance.role().wireName() + " already has " + registry.maxPerRole() + " instances, the most"
                    + " held");
            case CLAIMED -> refuse("address_claimed", "record " + LogText.escape(kv.key()) + " claims the address of"
                    + " another live instance");
            case REPLAYED -> refuse("replayed", "record " + LogText.escape(kv.key()) + " is no newer than the one"
                    + " held for its instance (an older incarnation, or an older signature)");
        }
    }

    /** Drops the record at {@code key}, and its instance unless another record still names it. Holds this. */
    private void delete(String key) {
        Held gone = byKey.remove(key);
        if (gone != null) {
            release(gone.instance());
        }
    }

    private void release(Instance instance) {
        for (Held other : byKey.values()) {
            if (other.instance().equals(instance)) {
                return; // a restarted instance's newer record holds it
            }
        }
        registry.remove(instance);
    }

    private void refuse(String reason, String message) {
        refused.computeIfAbsent(reason, r -> new AtomicLong()).incrementAndGet();
        warnOnce(reason, "refused a membership record of cluster " + cluster + " (" + reason + "): " + message);
    }

    /** The first line of each reason at warn, the rest at debug. */
    private void warnOnce(String reason, String line) {
        if (warnedReasons.add(reason)) {
            LOG.warn("{}. Later ones like it are logged at debug level", line);
        } else {
            LOG.debug("{}", line);
        }
    }

    @Override
    public void dispose() {
        loop.dispose();
    }

    @Override
    public boolean isDisposed() {
        return loop.isDisposed();
    }
}
