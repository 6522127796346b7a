package dev.kvflux.tools.chaos;

import java.time.Duration;
import java.util.Arrays;
import java.util.List;

/**
 * The faults of membership across hosts ({@code kvflux chaos --hosts netns}), run on a {@link NetnsEtcdCluster}: three
 * etcd members, two proxies, a prefill and a decode, each on a host of its own, the load going from the client host to
 * both proxies in turn. Each strikes once a third of the requests have started, heals after {@link #LASTS}, and
 * measures its own recovery from the heal ({@link #strike}).
 */
enum EtcdHostFault implements ChaosFault {
    /**
     * One proxy cut from all three etcd members, both ways, while the other keeps its links. Recovery: from the heal
     * until that proxy is connected to etcd again, lists what the other proxy lists, and routes a request.
     */
    PROXY_ETCD("partition-proxy-etcd"),
    /**
     * The etcd leader (as the members' status says) cut from the other two members, both ways; clients still reach it.
     * Recovery: from the heal until the three members agree on a leader and both proxies are connected, list every
     * instance and route a request.
     */
    LEADER_ISOLATED("isolate-etcd-leader"),
    /**
     * Decode killed ({@code kill -9}), prefill and decode cut from each other, decode started again (down for the
     * downtime) while cut, then healed once the cut has lasted {@link #LASTS} (or once decode is healthy, if later).
     * Recovery: from the heal until both proxies have routed a request.
     */
    DECODE_RESTART("partition-decode-restart");

    /** How long each fault's partition lasts. */
    static final Duration LASTS = Partition.HEAL_AFTER;
    /** Every label, in order. */
    static final List<String> LABELS = Arrays.stream(values()).map(ChaosFault::label).toList();

    private final String label;

    EtcdHostFault(String label) {
        this.label = label;
    }

    /**
     * Does the fault to {@code cluster} once a third of the requests have started (a killed role down for
     * {@code downtime}), heals it, and measures the recovery.
     */
    EtcdCluster.Figures strike(NetnsEtcdCluster cluster, Duration downtime) throws Exception {
        return switch (this) {
            case PROXY_ETCD -> cluster.proxyEtcdCut(LASTS);
            case LEADER_ISOLATED -> cluster.leaderIsolated(LASTS);
            case DECODE_RESTART -> cluster.decodeRestartPartitioned(LASTS, downtime);
        };
    }

    @Override
    public String label() {
        return label;
    }

    @Override
    public Expectation expectation() {
        return Expectation.NONE;
    }
}
