package dev.kvflux.tools.chaos;

import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The chaos run's faults on etcd: the membership faults ({@link ChaosFault.Membership}) on an {@link EtcdCluster} on
 * loopback, the faults across hosts ({@link EtcdHostFault}) on a {@link NetnsEtcdCluster}. The cluster is started at the
 * first such fault and shared by the rest; for each fault the load goes through both proxies while the fault strikes,
 * then the roles settle, and the fault's recovery is the one it measured. Not thread-safe: one fault at a time.
 */
final class EtcdFaultRun implements AutoCloseable {
    /** Decode's checks of write_done's checksum; {@code result="corrupt"} counts KV that failed it. */
    private static final String CORRUPT_KV = "kvflux_decode_kv_checks_total";

    /** A cluster of roles and two proxies on etcd that the faults strike. */
    interface Cluster extends AutoCloseable {
        /** The proxies' base URLs, where the load goes (request {@code i} to proxy {@code i % 2}). */
        List<String> bases();

        /** The instances: prefill, then the decodes. */
        List<RoleProcess> roles();

        /** Ends what the last fault left behind. */
        void afterFault() throws Exception;
    }

    /** How the run waits for roles to settle and reads what they still hold ({@code roles}: prefill, then decodes). */
    @FunctionalInterface
    interface Settle {
        ChaosRun.Leaks of(List<RoleProcess> roles) throws InterruptedException;
    }

    private final ChaosRun.Settings settings;
    private final ChaosLoad load;
    private final Netns hosts;
    private final Settle settle;
    private Cluster cluster;

    /** For {@code settings}' faults on etcd, with {@code hosts} for those across hosts (null on loopback). */
    EtcdFaultRun(ChaosRun.Settings settings, ChaosLoad load, Netns hosts, Settle settle) {
        this.settings = settings;
        this.load = load;
        this.hosts = hosts;
        this.settle = settle;
    }

    /** Whether {@code fault} runs here. */
    static boolean runs(ChaosFault fault) {
        return fault instanceof ChaosFault.Membership || fault instanceof EtcdHostFault;
    }

    /**
     * Runs {@code fault} on the cluster (started with {@code prefillArgs} and {@code decodeArgs} at the first fault),
     * a killed role down for {@code downtime}.
     */
    ChaosRun.FaultResult run(ChaosFault fault, List<String> prefillArgs, List<String> decodeArgs, Duration downtime)
            throws Exception {
        if (cluster == null) {
            // the proxies give up on a decode's first byte before the load gives up on its answer
            List<String> proxyArgs = List.of("--first-byte-timeout",
                    settings.receiveDeadline().plusSeconds(2).toMillis() + "ms");
            cluster = fault instanceof EtcdHostFault
                    ? NetnsEtcdCluster.start(hosts, settings.logDir(), prefillArgs, decodeArgs, proxyArgs,
                            settings.requestTimeout())
                    : EtcdCluster.start(settings.logDir(), prefillArgs, decodeArgs, proxyArgs, settings.requestTimeout());
        }
        List<RoleProcess> roles = cluster.roles();
        long corruptBefore = 0;
        for (RoleProcess decode : roles.subList(1, roles.size())) {
            corruptBefore += decode.metrics().count(CORRUPT_KV, "result", "corrupt");
        }
        EtcdCluster.Figures[] figures = new EtcdCluster.Figures[1];
        List<ChaosLoad.Result> results;
        try {
            results = load.run(fault, cluster.bases(), () -> figures[0] = switch (fault) {
                case ChaosFault.Membership m -> m.strike((EtcdCluster) cluster, downtime);
                case EtcdHostFault h -> h.strike((NetnsEtcdCluster) cluster, downtime);
                default -> throw new IllegalArgumentException(fault.label() + " does not run on etcd");
            });
        } finally {
            cluster.afterFault();
        }
        ChaosRun.Leaks leaks = settle.of(roles).corruptSince(corruptBefore);
        Map<String, Double> all = new LinkedHashMap<>(figures[0].figures());
        all.putAll(dev.kvflux.tools.chaos.history.HistoryCheck.figures(settings.logDir(), fault.label()));
        for (int p = 0; p < cluster.bases().size(); p++) {
            int proxy = p;
            all.put("requests_via_proxy_" + p, (double) results.stream().filter(r -> r.via() == proxy).count());
            all.put("completed_via_proxy_" + p, (double) results.stream()
                    .filter(r -> r.via() == proxy && r.outcome() == ChaosLoad.Outcome.COMPLETED).count());
        }
        return FaultSummary.of(fault, results, Long.MIN_VALUE, leaks, figures[0].recoverySeconds(), all);
    }

    @Override
    public void close() throws Exception {
        if (cluster != null) {
            cluster.close();
        }
    }
}
