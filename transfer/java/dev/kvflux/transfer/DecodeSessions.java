package dev.kvflux.transfer;

import dev.kvflux.bindings.TransferSession;
import java.net.InetSocketAddress;
import java.util.Objects;

/**
 * Which engine session a prefill side writes a transfer through: one per decode (and per decode incarnation,
 * when decode's memory is registered anew at every start). Asked once per transfer, when decode's block list has
 * come, on the notify event loop or the write's thread: it must not block.
 */
@FunctionalInterface
public interface DecodeSessions {

    /**
     * The session into the KV region of the decode at notify address {@code decode}, incarnation
     * {@code incarnation} (0 when that decode does not say).
     *
     * @throws RuntimeException if there is none (the transfer then fails with {@code ERR_BAD_STATE} and the reason)
     */
    TransferSession session(InetSocketAddress decode, long incarnation);

    /** Every transfer through {@code session}, whichever decode it goes to. */
    static DecodeSessions of(TransferSession session) {
        Objects.requireNonNull(session, "session");
        return (decode, incarnation) -> session;
    }
}
