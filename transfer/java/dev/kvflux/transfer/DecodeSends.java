package dev.kvflux.transfer;

import dev.kvflux.transfer.notify.NotifyClient;
import dev.kvflux.transfer.notify.NotifyMessage;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * What decode tells prefill on its own: {@code abort} for a transfer that ended before prefill said how its write
 * ended, and {@code release} once decode's reads of prefill's blocks are over (READ mode). Each is retried through
 * the side's notify client and counted while in flight, so that {@link DecodeSide#close()} can wait for them.
 */
final class DecodeSends {
    /** The shortest time an abort is retried towards prefill. */
    private static final Duration ABORT_AT_LEAST_WITHIN = Duration.ofSeconds(5);

    private final NotifyClient client;
    private final DecodeRecorder recorder;
    /** How long a block list, and so a release, is retried. */
    private final Duration blocksWithin;
    private final AtomicInteger inFlight = new AtomicInteger();

    private final SideHistory history;

    DecodeSends(NotifyClient client, DecodeRecorder recorder, Duration blocksWithin, SideHistory history) {
        this.client = client;
        this.recorder = recorder;
        this.history = history;
        this.blocksWithin = blocksWithin;
    }

    /** Tells prefill {@code abort}: decode no longer wants the transfer's KV, for {@code reason}. */
    void abort(String id, String traceId, InetSocketAddress prefill, String reason) {
        recorder.record(DecodeRecorder.Event.ABORT_SENT, id);
        // an abort is useful until prefill's own deadline for the transfer, later than decode's: retry it for at
        // least 5 s even when the block list's window is shorter
        Duration within = blocksWithin.compareTo(ABORT_AT_LEAST_WITHIN) < 0 ? ABORT_AT_LEAST_WITHIN : blocksWithin;
        send(id, traceId, prefill, new NotifyMessage.Abort(id, reason, history.incarnation()), within);
    }

    /** READ mode: tells prefill {@code release}: nothing decode posted reads its blocks any more. */
    void release(String id, String traceId, InetSocketAddress prefill, long prefillIncarnation, int tpSize) {
        recorder.record(DecodeRecorder.Event.READ_RELEASE_SENT, id);
        send(id, traceId, prefill, new NotifyMessage.Release(id, history.incarnation(), prefillIncarnation, tpSize),
                blocksWithin);
    }

    private void send(String id, String traceId, InetSocketAddress prefill, NotifyMessage message, Duration within) {
        inFlight.incrementAndGet();
        history.message(TransferHistory.Kind.SENT, message, "");
        client.send(prefill, message, within)
                .doFinally(signal -> inFlight.decrementAndGet())
                .contextWrite(LogContext.context(id, traceId))
                .subscribe();
    }

    /** Messages still being sent. */
    int inFlight() {
        return inFlight.get();
    }
}
