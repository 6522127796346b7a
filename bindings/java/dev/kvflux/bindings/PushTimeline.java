package dev.kvflux.bindings;

/**
 * When one pushed completion passed each stage on its way from the GPU to the status's listeners, on
 * {@link System#nanoTime()}'s clock, so that a push's detection lag can be told stage by stage. A stage this
 * backend does not have, or that the push did not pass (a status settled by a query), is
 * {@link TransferStatus#UNKNOWN_TIME}.
 *
 * @param callbackRan  the host function behind the batch's copies ran on the GPU runtime's callback thread: the
 *                     copies' end as the host learns it ({@link TransferStatus#completedAtNanos()})
 * @param notifierWoke a thread of the backend took that signal from the runtime's thread (over MoRI, the thread
 *                     that asks for pushes or the shim's notifier; on the CUDA engine, its dispatch thread)
 * @param queued       the backend found the status terminal and queued its completion for the thread that asks
 * @param taken        the backend handed the completion to the thread that asks for pushes
 * @param returned     that thread was back in Java with it
 * @param settled      the status settled and told its listeners
 */
public record PushTimeline(long callbackRan, long notifierWoke, long queued, long taken, long returned,
                           long settled) {

    /** A status that was not settled by a push, or whose backend records no stage. */
    public static final PushTimeline NONE = new PushTimeline(TransferStatus.UNKNOWN_TIME, TransferStatus.UNKNOWN_TIME,
            TransferStatus.UNKNOWN_TIME, TransferStatus.UNKNOWN_TIME, TransferStatus.UNKNOWN_TIME,
            TransferStatus.UNKNOWN_TIME);

    /** The stages' names, in order, as {@code kvflux repro} reports them. */
    public static final java.util.List<String> STAGES = java.util.List.of("callback_ran", "notifier_woke", "queued",
            "taken", "returned", "settled");

    /** The stages' times in the order of {@link #STAGES}. */
    public long[] times() {
        return new long[] {callbackRan, notifierWoke, queued, taken, returned, settled};
    }
}
