package dev.kvflux.examples.webflux;

import com.fasterxml.jackson.annotation.JsonInclude;
import dev.kvflux.bindings.StatusCode;
import dev.kvflux.examples.webflux.TransferContext.WaitReport;
import dev.kvflux.operators.TransferException;
import dev.kvflux.pipeline.WriteOutcome;
import dev.kvflux.pipeline.WriteOutcome.WriteDone;
import dev.kvflux.pipeline.WriteOutcome.WriteFailed;

/**
 * The answer to {@code POST /transfers}: {@code write_done}, or {@code write_failed} with the status code,
 * how it failed ({@code FAILED}, {@code TIMED_OUT} or {@code STALLED}) and the reason.
 */
@JsonInclude(JsonInclude.Include.NON_NULL)
public record TransferResult(String transferId, String outcome, StatusCode code, TransferException.Kind kind,
                             String reason) {
    public static final String WRITE_DONE = "write_done";
    public static final String WRITE_FAILED = "write_failed";

    /**
     * The result of a pipeline outcome. A failure the wait did not report (a layer that could not be
     * posted) takes the kind the library gives such an error: TIMED_OUT for IN_PROGRESS, else FAILED.
     */
    static TransferResult of(WriteOutcome outcome, WaitReport report) {
        return switch (outcome) {
            case WriteDone done -> new TransferResult(done.transferId(), WRITE_DONE, null, null, null);
            case WriteFailed failed -> new TransferResult(failed.transferId(), WRITE_FAILED, failed.code(),
                    report.failureKind().orElse(failed.code() == StatusCode.IN_PROGRESS
                            ? TransferException.Kind.TIMED_OUT : TransferException.Kind.FAILED),
                    failed.reason());
        };
    }
}
