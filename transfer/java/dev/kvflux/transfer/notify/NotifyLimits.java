package dev.kvflux.transfer.notify;

import java.time.Duration;
import java.util.Objects;

/**
 * What a role's notify channel grants its peers: how many connections its server holds, how long a started
 * frame may take to arrive, how long a connection may stay silent, how many (estimated heap) bytes it
 * keeps of messages nobody has asked for yet (decode's early notices, prefill's unclaimed block lists), and
 * how fast it reads large frames.
 *
 * @param maxConnections the most connections the notify server holds, 1 to 1,048,576
 * @param frameReadTimeout how long a frame may take to arrive once its first byte has
 * @param idleTimeout how long a connection may stay silent before the server closes it
 * @param peerBudgetBytes estimated heap bytes kept of messages nobody asked for yet, at least 1 KiB
 * @param bulkBytesPerSecond the most bytes per second the server reads in reads larger than one notification,
 *     over all its connections ({@link NotifyServer.Builder#bulkBytesPerSecond}), 1 MiB/s to 64 GiB/s
 */
public record NotifyLimits(int maxConnections, Duration frameReadTimeout, Duration idleTimeout,
        long peerBudgetBytes, long bulkBytesPerSecond) {
    /** 1,024 connections, 10 s per frame, 120 s idle, 16 MiB for peers, 16 MiB/s of large frames. */
    public static final NotifyLimits DEFAULTS = new NotifyLimits(NotifyServer.DEFAULT_MAX_CONNECTIONS,
            NotifyServer.DEFAULT_FRAME_READ_TIMEOUT, NotifyServer.DEFAULT_IDLE_TIMEOUT, 16L << 20);

    /** These limits with the default bulk rate, {@link NotifyServer#DEFAULT_BULK_BYTES_PER_SECOND}. */
    public NotifyLimits(int maxConnections, Duration frameReadTimeout, Duration idleTimeout, long peerBudgetBytes) {
        this(maxConnections, frameReadTimeout, idleTimeout, peerBudgetBytes,
                NotifyServer.DEFAULT_BULK_BYTES_PER_SECOND);
    }

    /** @throws IllegalArgumentException naming the value that is out of range */
    public NotifyLimits {
        if (maxConnections < 1 || maxConnections > 1 << 20) {
            throw new IllegalArgumentException("notify max connections must be from 1 to 1048576, got "
                    + maxConnections);
        }
        positive(frameReadTimeout, "frame read timeout");
        positive(idleTimeout, "idle timeout");
        if (peerBudgetBytes < 1024) {
            throw new IllegalArgumentException("the notify peer budget must be at least 1024 bytes, got "
                    + peerBudgetBytes);
        }
        if (bulkBytesPerSecond < 1L << 20 || bulkBytesPerSecond > 64L << 30) {
            throw new IllegalArgumentException("the notify bulk rate must be from 1 MiB/s to 64 GiB/s, got "
                    + bulkBytesPerSecond + " bytes per second");
        }
    }

    private static void positive(Duration value, String what) {
        Objects.requireNonNull(value, what);
        if (value.isZero() || value.isNegative()) {
            throw new IllegalArgumentException("the notify " + what + " must be positive, got " + value);
        }
    }
}
