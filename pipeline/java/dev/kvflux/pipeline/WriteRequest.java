package dev.kvflux.pipeline;

import dev.kvflux.bindings.TransferSession;
import java.util.Objects;
import reactor.core.publisher.Flux;

/**
 * One request's WRITE: its transfer id (what decode knows it by), the session to decode's buffer, and its
 * layers as they come out of the forward pass. The request is sealed when {@code layers} completes: no
 * more layers will come, and the completion wait may start once the last one is posted.
 */
public record WriteRequest(String transferId, TransferSession session, Flux<LayerWrite> layers) {
    public WriteRequest {
        Objects.requireNonNull(transferId, "transferId");
        Objects.requireNonNull(session, "session");
        Objects.requireNonNull(layers, "layers");
    }
}
