package dev.kvflux.tools.chaos;

import dev.kvflux.tools.chaos.history.HistoryCheck;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.IntStream;

/** The verdict on one fault's run: what every fault must keep, and what each promises beyond it. */
final class Verdict {
    private Verdict() {
    }

    /**
     * What in {@code r} breaks what every fault must keep (every request ended, with a reason if it failed, and
     * nothing leaked or corrupt) or what this fault promises beyond that; empty when the fault's run was clean.
     */
    static List<String> of(ChaosRun.FaultResult r) {
        ChaosFault.Expectation expectation = ChaosFault.named(r.fault()).expectation();
        List<String> broken = new ArrayList<>();
        if (r.neverFinished() > 0) {
            broken.add(r.neverFinished() + " requests never finished");
        }
        if (r.failedWithoutReason() > 0 && expectation != ChaosFault.Expectation.CUT_WITH_THE_PROXY) {
            broken.add(r.failedWithoutReason() + " requests failed without a reason");
        }
        if (r.leakedBlocks() > 0 || r.leakedHandles() > 0) {
            broken.add(r.leakedBlocks() + " blocks and " + r.leakedHandles() + " handles still held");
        }
        double history = r.figures().getOrDefault(HistoryCheck.FIGURE, 0.0);
        if (history != 0) {
            broken.add(history < 0 ? "its history could not be checked (see " + r.fault() + "-history-check.txt)"
                    : (long) history + " history violations (see " + r.fault() + "-history-check.txt)");
        }
        if (r.corruptOutputs() > 0) {
            broken.add(r.corruptOutputs() + " outputs whose KV failed decode's check");
        }
        switch (expectation) {
            case SOME_FAIL_CLEANLY -> {
                if (r.failedCleanly() == 0) {
                    broken.add("the injected fault failed no request: it did not strike");
                }
            }
            case ALL_COMPLETE -> {
                if (r.completed() != r.requests()) {
                    broken.add("only " + r.completed() + " of " + r.requests() + " completed, where every one must "
                            + r.reasons());
                }
            }
            case INVALID_FAIL_CLEANLY -> {
                ChaosFault named = ChaosFault.named(r.fault());
                long invalid = IntStream.range(0, r.requests())
                        .filter(i -> named.request(i) == ChaosFault.Request.INVALID).count();
                if (r.failedCleanly() != invalid) {
                    broken.add(r.failedCleanly() + " failed cleanly, where the " + invalid + " invalid requests must "
                            + r.reasons());
                }
            }
            case OTHERS_COMPLETE -> {
                if (r.cancelledByClient() + r.completed() != r.requests()) {
                    broken.add((r.requests() - r.completed() - r.cancelledByClient())
                            + " requests neither completed nor were given up by their client " + r.reasons());
                }
            }
            case CUT_WITH_THE_PROXY -> {
                if (r.completed() + r.failedWithoutReason() != r.requests()) {
                    broken.add((r.requests() - r.completed() - r.failedWithoutReason())
                            + " requests failed other than by being cut with the killed proxy " + r.reasons());
                }
            }
            case NONE -> { }
        }
        return broken;
    }
}
