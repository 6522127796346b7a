package dev.kvflux.transfer;

import dev.kvflux.bindings.TransferSession;
import dev.kvflux.transfer.notify.KvRegion;
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

    /**
     * The layout of that decode's KV region, when it is not prefill's own (a decode that described its region,
     * {@link HandshakeSessions}); null when it is. Asked when decode's block list has come, before the first post.
     *
     * @throws RuntimeException if that decode's region is not known (the transfer then fails with
     *     {@code ERR_BAD_STATE} and the reason)
     */
    default KvLayout layout(InetSocketAddress decode, long incarnation) {
        return null;
    }

    /**
     * Decode incarnation {@code incarnation} said where its KV lives: it sends its {@link KvRegion} with every block
     * list, on the notify event loop (must not block). Nothing by default.
     */
    default void described(long incarnation, KvRegion region) {
    }

    /** A transfer that got its session from {@link #session} has drained: nothing more is posted through it. */
    default void released(InetSocketAddress decode, long incarnation) {
    }

    /** Every transfer through {@code session}, whichever decode it goes to. */
    static DecodeSessions of(TransferSession session) {
        Objects.requireNonNull(session, "session");
        return (decode, incarnation) -> session;
    }
}
