package dev.kvflux.pipeline;

import dev.kvflux.bindings.TransferStatus;
import dev.kvflux.operators.CompletionWait;
import dev.kvflux.operators.FailMode;
import dev.kvflux.operators.TransferException;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;

/**
 * The decode side's READ barrier: before a layer's attention runs, wait for that layer's read statuses
 * with drain semantics, so that when it errors no read is still writing into the layer's buffers.
 *
 * <p>{@link #await} completes when every status succeeded; if one fails it errors only once nothing is
 * in flight any more, with a {@link TransferException} carrying the earliest listed failure's code and
 * message; at the transfer timeout with reads in flight it errors with IN_PROGRESS and the
 * message {@code MoRIIO batch wait failed (StatusCode.IN_PROGRESS): RDMA transfer timed out after 30s}. It polls every slice on the scheduler ({@code Schedulers.parallel()} unless set).
 */
public final class ReadBarrier {
    private final CompletionWait wait;

    private ReadBarrier(CompletionWait wait) {
        this.wait = wait;
    }

    /**
     * A barrier with {@code CompletionWait.drain(transferTimeout)}.
     *
     * @throws IllegalArgumentException if the timeout is zero, negative or over 24 hours
     */
    public static ReadBarrier of(Duration transferTimeout) {
        return new ReadBarrier(CompletionWait.drain(transferTimeout));
    }

    /**
     * A barrier over a given drain wait (to set its slice and scheduler).
     *
     * @throws IllegalArgumentException if {@code wait} fails fast: a READ barrier must drain
     */
    public static ReadBarrier using(CompletionWait wait) {
        Objects.requireNonNull(wait, "wait");
        if (wait.mode() != FailMode.DRAIN) {
            throw new IllegalArgumentException("a READ barrier must drain (CompletionWait.drain(...)), got " + wait
                    + "; failing fast would let decode reuse buffers that reads still write into");
        }
        return new ReadBarrier(wait);
    }

    public ReadBarrier slice(Duration slice) {
        return new ReadBarrier(wait.slice(slice));
    }

    public ReadBarrier scheduler(Scheduler scheduler) {
        return new ReadBarrier(wait.scheduler(scheduler));
    }

    /** Waits for one layer's read statuses (see the class comment). */
    public Mono<Void> await(List<? extends TransferStatus> layerReads) {
        return wait.await(layerReads);
    }

    @Override
    public String toString() {
        return "ReadBarrier[" + wait + "]";
    }
}
