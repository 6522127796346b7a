package dev.kvflux.tools.bench;

import dev.kvflux.tools.Stats;
import java.util.Arrays;
import java.util.List;

/**
 * The client's view of one benchmark run: every request's result and how long the run took. The TTFT
 * figures are over completed requests only, as {@code vllm bench serve} reports them; percentiles
 * interpolate linearly between order statistics (numpy's default).
 */
public record LoadResult(List<RequestResult> requests, double durationSeconds) {

    public LoadResult {
        requests = List.copyOf(requests);
    }

    public int sent() {
        return requests.size();
    }

    public int completed() {
        return count(RequestResult.Outcome.COMPLETED);
    }

    public int failed() {
        return count(RequestResult.Outcome.FAILED);
    }

    public int neverFinished() {
        return count(RequestResult.Outcome.NEVER_FINISHED);
    }

    /** Completed requests per second of the run. */
    public double requestThroughput() {
        return durationSeconds > 0 ? completed() / durationSeconds : 0;
    }

    /** TTFTs of completed requests, sorted. */
    public double[] ttfts() {
        return requests.stream().filter(r -> r.outcome() == RequestResult.Outcome.COMPLETED)
                .mapToDouble(RequestResult::ttftSeconds).sorted().toArray();
    }

    public double ttftMean() {
        return Arrays.stream(ttfts()).average().orElse(Double.NaN);
    }

    /** The {@code p}-th percentile (0..100) of completed requests' TTFT; NaN if none completed. */
    public double ttftPercentile(double p) {
        return Stats.interpolated(ttfts(), p / 100);
    }

    /** The first distinct error messages, for the report. */
    public List<String> sampleErrors(int max) {
        return requests.stream().filter(r -> r.outcome() == RequestResult.Outcome.FAILED)
                .map(RequestResult::error).distinct().limit(max).toList();
    }

    private int count(RequestResult.Outcome outcome) {
        return (int) requests.stream().filter(r -> r.outcome() == outcome).count();
    }
}
