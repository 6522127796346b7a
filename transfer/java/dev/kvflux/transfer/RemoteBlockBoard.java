package dev.kvflux.transfer;

import dev.kvflux.transfer.notify.LogText;
import dev.kvflux.transfer.notify.NotifyEvent;
import dev.kvflux.transfer.notify.NotifyLimits;
import dev.kvflux.transfer.notify.NotifyMessage;
import dev.kvflux.transfer.notify.NotifyRecorder;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;

/**
 * Prefill's side of {@code remote_blocks}: decode's block list for each transfer, whichever comes
 * first, the list or the request that needs it.
 *
 * <p>A list whose request is waiting is handed to it at once. A list nobody waits for yet (it came first,
 * its request never comes, or it came after the write stopped waiting, or a peer sent it unasked) is kept
 * within a byte budget (default 16 MiB of estimated heap bytes, {@link NotifyLimits#peerBudgetBytes()}) and a count
 * ({@value #DEFAULT_CAPACITY}); beyond either, the oldest is dropped and counted
 * ({@link NotifyEvent#EARLY_DROPPED}), so the board grows neither with traffic nor with a peer's frames.
 */
final class RemoteBlockBoard implements Consumer<NotifyMessage> {
    private static final Logger LOG = LoggerFactory.getLogger(RemoteBlockBoard.class);

    /** How many transfers' lists, and separately how many waiting requests, are kept at most. */
    static final int DEFAULT_CAPACITY = 16_384;
    /** Default byte budget of the lists nobody waits for yet. */
    static final long DEFAULT_BUDGET_BYTES = NotifyLimits.DEFAULTS.peerBudgetBytes();

    private final Map<String, Sinks.One<List<Long>>> waiting;
    private final RetainedBytes<List<Long>> unclaimed;

    RemoteBlockBoard() {
        this(DEFAULT_CAPACITY);
    }

    RemoteBlockBoard(int capacity) {
        this(DEFAULT_BUDGET_BYTES, capacity, NotifyRecorder.NOOP);
    }

    /** A board keeping unclaimed lists within {@code budgetBytes} and {@code capacity}, reporting drops to {@code recorder}. */
    RemoteBlockBoard(long budgetBytes, int capacity, NotifyRecorder recorder) {
        unclaimed = new RetainedBytes<>(budgetBytes, capacity, (id, blocks) -> {
            recorder.record(NotifyEvent.EARLY_DROPPED);
            // dropped while another transfer's message is handled: the line is about the dropped one
            try (LogContext.Scope _ = LogContext.open(id, null)) {
                LOG.debug("forgetting decode's {} blocks for transfer {}: unclaimed block lists are over their budget",
                        blocks.size(), LogText.escape(id));
            }
        });
        waiting = new LinkedHashMap<>(16, 0.75f, false) {
            @Override
            protected boolean removeEldestEntry(Map.Entry<String, Sinks.One<List<Long>>> eldest) {
                return size() > capacity;
            }
        };
    }

    @Override
    public void accept(NotifyMessage message) {
        if (message instanceof NotifyMessage.RemoteBlocks blocks) {
            Sinks.One<List<Long>> sink;
            synchronized (this) {
                sink = waiting.remove(blocks.transferId());
                if (sink == null) {
                    unclaimed.put(blocks.transferId(), blocks.blockNotifyList(), RetainedBytes.of(blocks));
                    return;
                }
            }
            sink.tryEmitValue(blocks.blockNotifyList());
        }
    }

    /** Emits decode's blocks for the transfer once they are here; forgets them after. */
    Mono<List<Long>> blocks(String transferId) {
        return Mono.defer(() -> {
            Sinks.One<List<Long>> sink;
            synchronized (this) {
                List<Long> here = unclaimed.remove(transferId);
                if (here != null) {
                    return Mono.just(here);
                }
                sink = waiting.computeIfAbsent(transferId, id -> Sinks.one());
            }
            return sink.asMono().doFinally(signal -> forget(transferId, sink));
        });
    }

    /** How many transfers have a list kept or a request waiting. */
    synchronized int size() {
        return waiting.size() + unclaimed.size();
    }

    /** The estimated bytes of the lists nobody waits for yet. */
    synchronized long unclaimedBytes() {
        return unclaimed.bytes();
    }

    private synchronized void forget(String transferId, Sinks.One<List<Long>> sink) {
        waiting.remove(transferId, sink);
    }
}
