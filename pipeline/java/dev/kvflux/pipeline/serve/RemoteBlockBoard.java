package dev.kvflux.pipeline.serve;

import dev.kvflux.pipeline.net.NotifyMessage;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Consumer;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;

/**
 * Prefill's side of {@code remote_blocks}: decode's block list for each transfer, whichever comes
 * first, the list or the request that needs it.
 */
final class RemoteBlockBoard implements Consumer<NotifyMessage> {
    private final Map<String, Sinks.One<List<Long>>> boards = new ConcurrentHashMap<>();

    @Override
    public void accept(NotifyMessage message) {
        if (message instanceof NotifyMessage.RemoteBlocks blocks) {
            slot(blocks.transferId()).tryEmitValue(blocks.blockNotifyList());
        }
    }

    /** Emits decode's blocks for the transfer once they are here; forgets them after. */
    Mono<List<Long>> blocks(String transferId) {
        return Mono.defer(() -> slot(transferId).asMono()).doFinally(signal -> boards.remove(transferId));
    }

    private Sinks.One<List<Long>> slot(String transferId) {
        return boards.computeIfAbsent(transferId, id -> Sinks.one());
    }
}
