package dev.kvflux.operators;

import dev.kvflux.bindings.LayerEvent;
import dev.kvflux.bindings.TransferStatus;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Flow;
import reactor.adapter.JdkFlowAdapter;

/**
 * The waits and polls for code that does not use Reactor: JDK {@link Flow.Publisher}s and
 * {@link CompletableFuture}s in and out. Each call subscribes to nothing until its result is subscribed to (the
 * publishers) or is made (the futures, which start at once); the semantics, bounds and errors are those of the
 * Reactor call it wraps ({@link WaitStrategy#awaitAll}, {@link WaitStrategy#await}, {@link Polls#layerReady}).
 */
public final class FlowWaits {
    private FlowWaits() {
    }

    /**
     * Completes once {@code statuses} has completed and {@code wait} is through with every status it gave; errors
     * with the wait's {@link TransferException}.
     */
    public static Flow.Publisher<Void> awaitAll(WaitStrategy wait, Flow.Publisher<? extends TransferStatus> statuses) {
        Objects.requireNonNull(wait, "wait");
        Objects.requireNonNull(statuses, "statuses");
        return JdkFlowAdapter.publisherToFlowPublisher(wait.awaitAll(JdkFlowAdapter.flowPublisherToFlux(statuses)));
    }

    /**
     * Starts {@code wait} over {@code statuses} now; the future completes when it is through, or exceptionally with
     * its {@link TransferException}. Cancelling the future stops the wait.
     */
    public static CompletableFuture<Void> await(WaitStrategy wait, List<? extends TransferStatus> statuses) {
        Objects.requireNonNull(wait, "wait");
        return wait.await(statuses).toFuture();
    }

    /** {@link Polls#layerReady(LayerEvent)} as a JDK publisher: completes once the event is ready, within 30 s. */
    public static Flow.Publisher<Void> layerReady(LayerEvent event) {
        return JdkFlowAdapter.publisherToFlowPublisher(Polls.layerReady(event));
    }
}
