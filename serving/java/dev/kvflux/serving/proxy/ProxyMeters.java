package dev.kvflux.serving.proxy;

import dev.kvflux.serving.api.Role;
import dev.kvflux.serving.metrics.RoleMetrics;

/**
 * The proxy's meters, registered once its routes exist, all tagged {@code role=proxy}: the timer
 * {@code kvflux.proxy.requests} from a completion's arrival to
 * the end of its answer (tag {@code status}: the HTTP status, or {@code cancelled} when the client went
 * away first), {@code kvflux.proxy.upstream.errors} (tags {@code upstream}: prefill or decode, and
 * {@code reason}: failed, overloaded, client_share, unreachable, timeout, stalled, pool_full) and the gauge
 * {@code kvflux.proxy.instances} (live instances, tag {@code upstream}); with etcd, the gauge
 * {@code kvflux.proxy.membership.connected} (1 while etcd answers and the watch runs, else 0; tag
 * {@code source=etcd}), {@code kvflux.proxy.membership.reads} (reads of the whole prefix: one at start, one per
 * reconnection) and {@code kvflux.proxy.membership.records.refused} (tag {@code reason}).
 * Besides: {@code kvflux.proxy.canaries} and {@code .canaries.failed} (canary requests through decodes whose work was in
 * doubt), {@code kvflux.proxy.streams.watched} (decode streams whose progress is watched) and
 * {@code kvflux.proxy.registrations.impostors} (registrations dropped because another instance answered at their HTTP
 * address).
 */
final class ProxyMeters {
    private ProxyMeters() {
    }

    static void register(RoleMetrics meters, ProxyRoutes.Handlers handlers, InstanceRegistry registry,
            InstanceHealth health, EtcdMembers members, Canaries canaries, StreamWatch streams) {
        // every failure kind is exported from the start, so a rate over them exists before the first one
        handlers.upstreamError(Role.PREFILL, "failed", 0);
        handlers.upstreamError(Role.PREFILL, "overloaded", 0);
        for (Role role : Role.values()) {
            handlers.upstreamError(role, "pool_full", 0);
        }
        handlers.upstreamError(Role.DECODE, "timeout", 0);
        handlers.upstreamError(Role.DECODE, "unreachable", 0);
        handlers.upstreamError(Role.DECODE, "stalled", 0);
        handlers.upstreamError(Role.PREFILL, "client_share", 0);
        for (Role role : Role.values()) {
            meters.gauge("kvflux.proxy.instances", "Live instances the proxy picks from", registry,
                    r -> r.live(role).size(), "upstream", role.wireName());
        }
        meters.gauge("kvflux.proxy.instances.ejected", "Instances ejected for failed health checks or requests",
                health, InstanceHealth::ejected);
        meters.functionCounter("kvflux.proxy.ejections", "Instances ejected so far", health,
                InstanceHealth::ejections);
        if (members != null) {
            meters.gauge("kvflux.proxy.membership.connected", "1 while etcd answers and its watch runs, else 0",
                    members, m -> m.connected() ? 1 : 0, "source", "etcd");
            meters.functionCounter("kvflux.proxy.membership.reads",
                    "Reads of the cluster's whole prefix in etcd: one at start, one per reconnection", members,
                    EtcdMembers::reads);
            for (String reason : new String[] {"malformed_key", "oversized", "malformed", "mismatch", "unsigned",
                    "bad_signature", "stale", "instance_cap", "address_claimed", "replayed"}) {
                meters.functionCounter("kvflux.proxy.membership.records.refused",
                        "Membership records in etcd the proxy refused, by reason", members, m -> m.refused(reason),
                        "reason", reason);
            }
        }
        meters.functionCounter("kvflux.proxy.registrations.claimed",
                "Registrations refused for claiming another live instance's address", registry,
                InstanceRegistry::refusedClaims);
        meters.functionCounter("kvflux.proxy.registrations.impostors", "Registrations dropped because another instance"
                + " answered at their HTTP address", registry, InstanceRegistry::impostors);
        meters.functionCounter("kvflux.proxy.canaries", "Canary requests sent through decodes whose work was in doubt",
                canaries, Canaries::sent);
        meters.functionCounter("kvflux.proxy.canaries.failed", "Canary requests that got no whole answer in time",
                canaries, Canaries::failed);
        meters.gauge("kvflux.proxy.streams.watched", "Decode streams whose progress the proxy watches", streams,
                StreamWatch::watching);
    }

    /**
     * The vLLM instances' meters: {@code kvflux.proxy.vllm.registrations} (tag {@code outcome}: registered, refreshed,
     * replaced, mode_mismatch, full, claimed, malformed, not_allowed, greeting) when a vLLM discovery port is bound.
     */
    static void registerVllm(RoleMetrics meters, VllmInstances vllm,
            dev.kvflux.serving.vllm.VllmDiscovery discovery) {
        if (discovery == null) {
            return;
        }
        for (String outcome : new String[] {"registered", "refreshed", "replaced", "mode_mismatch", "full", "claimed",
                "malformed", "not_allowed", "greeting", "error"}) {
            meters.functionCounter("kvflux.proxy.vllm.registrations", "vLLM registrations on the vLLM discovery port,"
                    + " by what became of them", discovery, d -> d.outcome(outcome), "outcome", outcome);
        }
    }
}
