package dev.kvflux.tools.bench;

/**
 * What became of one benchmark request.
 *
 * @param outcome completed, failed with an error, or never finished within the bound
 * @param ttftSeconds time from sending to the first streamed token; NaN if none came
 * @param latencySeconds time from sending to the end of the answer; NaN unless completed
 * @param error the error the client saw, empty unless failed
 */
public record RequestResult(Outcome outcome, double ttftSeconds, double latencySeconds, String error) {

    /** The three ways a request can end. */
    public enum Outcome { COMPLETED, FAILED, NEVER_FINISHED }

    static RequestResult completed(double ttft, double latency) {
        return new RequestResult(Outcome.COMPLETED, ttft, latency, "");
    }

    static RequestResult failed(double ttft, String error) {
        return new RequestResult(Outcome.FAILED, ttft, Double.NaN, error);
    }

    static RequestResult neverFinished(double ttft) {
        return new RequestResult(Outcome.NEVER_FINISHED, ttft, Double.NaN, "");
    }
}
