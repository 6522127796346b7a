package dev.kvflux.tools.chaos;

import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/** One fault's {@link ChaosRun.FaultResult} from its requests' outcomes and what the roles still held. */
final class FaultSummary {
    private FaultSummary() {
    }

    /**
     * The fault's figures; {@code measuredRecovery} (seconds), when not NaN, is the recovery the fault measured itself,
     * and {@code figures} go with it.
     */
    static ChaosRun.FaultResult of(ChaosFault fault, List<ChaosLoad.Result> results, long faultEnd, ChaosRun.Leaks leaks,
            double measuredRecovery, Map<String, Double> figures) {
        Map<ChaosLoad.Outcome, Integer> counts = new java.util.EnumMap<>(ChaosLoad.Outcome.class);
        Map<String, Integer> reasons = new TreeMap<>();
        for (ChaosLoad.Result r : results) {
            counts.merge(r.outcome(), 1, Integer::sum);
            if (r.outcome() != ChaosLoad.Outcome.COMPLETED) {
                reasons.merge(r.reason(), 1, Integer::sum);
            }
        }
        double recovery;
        if (!Double.isNaN(measuredRecovery)) {
            recovery = measuredRecovery;
        } else if (faultEnd != Long.MIN_VALUE) {
            // a restart: until the first request started after it succeeds
            recovery = results.stream().filter(r -> r.outcome() == ChaosLoad.Outcome.COMPLETED && r.startNanos() >= faultEnd)
                    .mapToLong(r -> r.endNanos() - faultEnd).min().orElse(-1_000_000_000L) / 1e9;
        } else {
            // an interleaved fault: the longest wait from a disturbed request's end to the next success
            long[] successes = results.stream().filter(r -> r.outcome() == ChaosLoad.Outcome.COMPLETED)
                    .mapToLong(ChaosLoad.Result::endNanos).sorted().toArray();
            long worst = 0;
            for (ChaosLoad.Result r : results) {
                if (r.outcome() == ChaosLoad.Outcome.COMPLETED) {
                    continue;
                }
                int at = java.util.Arrays.binarySearch(successes, r.endNanos());
                int next = at >= 0 ? at : -at - 1;
                if (next < successes.length) {
                    worst = Math.max(worst, successes[next] - r.endNanos());
                }
            }
            recovery = worst / 1e9;
        }
        return new ChaosRun.FaultResult(fault.label(), results.size(), counts.getOrDefault(ChaosLoad.Outcome.COMPLETED, 0),
                counts.getOrDefault(ChaosLoad.Outcome.FAILED_CLEANLY, 0), counts.getOrDefault(ChaosLoad.Outcome.NEVER_FINISHED, 0),
                leaks.blocks(), leaks.handles(), counts.getOrDefault(ChaosLoad.Outcome.CORRUPT, 0) + (int) leaks.corrupt(),
                Math.round(recovery * 1000) / 1000.0,
                counts.getOrDefault(ChaosLoad.Outcome.FAILED_WITHOUT_REASON, 0), counts.getOrDefault(ChaosLoad.Outcome.CANCELLED, 0),
                reasons, figures);
    }
}
