package dev.kvflux.pipeline.serve;

import dev.kvflux.pipeline.net.NotifyMessage;
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
 * <p>A list whose request never comes (the proxy gave up on prefill, or the list arrived after the write
 * stopped waiting) is kept only until {@link #DEFAULT_CAPACITY} newer transfers have slots; then the
 * oldest is dropped, so the board does not grow with traffic.
 */
final class RemoteBlockBoard implements Consumer<NotifyMessage> {
    private static final Logger LOG = LoggerFactory.getLogger(RemoteBlockBoard.class);

    /** How many transfers' slots are kept at most. */
    static final int DEFAULT_CAPACITY = 16_384;

    private final Map<String, Sinks.One<List<Long>>> boards;

    RemoteBlockBoard() {
        this(DEFAULT_CAPACITY);
    }

    RemoteBlockBoard(int capacity) {
        boards = new LinkedHashMap<>(16, 0.75f, false) {
            @Override
            protected boolean removeEldestEntry(Map.Entry<String, Sinks.One<List<Long>>> eldest) {
                if (size() <= capacity) {
                    return false;
                }
                LOG.debug("forgetting decode's blocks for transfer {}: more than {} transfers are waiting",
                        eldest.getKey(), capacity);
                return true;
            }
        };
    }

    @Override
    public void accept(NotifyMessage message) {
        if (message instanceof NotifyMessage.RemoteBlocks blocks) {
            slot(blocks.transferId()).tryEmitValue(blocks.blockNotifyList());
        }
    }

    /** Emits decode's blocks for the transfer once they are here; forgets them after. */
    Mono<List<Long>> blocks(String transferId) {
        return Mono.defer(() -> slot(transferId).asMono()).doFinally(signal -> forget(transferId));
    }

    /** How many transfers have a slot. */
    synchronized int size() {
        return boards.size();
    }

    private synchronized Sinks.One<List<Long>> slot(String transferId) {
        return boards.computeIfAbsent(transferId, id -> Sinks.one());
    }

    private synchronized void forget(String transferId) {
        boards.remove(transferId);
    }
}
