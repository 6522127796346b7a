package dev.kvflux.transfer;

import dev.kvflux.transfer.notify.NotifyAuth;
import dev.kvflux.transfer.notify.NotifyLimits;
import dev.kvflux.transfer.notify.NotifyRecorder;
import java.util.Objects;
import java.util.function.Consumer;

/**
 * What both sides of a transfer are built with: where their notify server listens, the secret they sign with, what
 * their notify channel grants peers and where it reports, their blocks, the most one transfer may hold, and the
 * content check. Immutable, as the sides' builders ({@link PrefillSide.Builder}, {@link DecodeSide.Builder}) are:
 * every setter returns a changed copy.
 *
 * @param <B> the side's builder
 */
public abstract sealed class SideSettings<B extends SideSettings<B>> permits PrefillSide.Builder, DecodeSide.Builder {
    private final String side;
    String host = "127.0.0.1";
    int port;
    NotifyAuth auth;
    NotifyLimits limits = NotifyLimits.DEFAULTS;
    NotifyRecorder notifyRecorder = NotifyRecorder.NOOP;
    int blocks;
    int maxBlocksPerTransfer = Integer.MAX_VALUE;
    ContentCheck contentCheck = ContentCheck.NONE;

    SideSettings(String side, int defaultBlocks) {
        this.side = side;
        this.blocks = defaultBlocks;
    }

    SideSettings(SideSettings<B> from) {
        side = from.side;
        host = from.host;
        port = from.port;
        auth = from.auth;
        limits = from.limits;
        notifyRecorder = from.notifyRecorder;
        blocks = from.blocks;
        maxBlocksPerTransfer = from.maxBlocksPerTransfer;
        contentCheck = from.contentCheck;
    }

    /** A copy of this builder, to change. */
    abstract B copy();

    /** A copy with {@code change} applied. */
    final B with(Consumer<B> change) {
        B copy = copy();
        change.accept(copy);
        return copy;
    }

    /** Where the notify server listens; port 0 (the default) picks a free one. Default {@code 127.0.0.1}. */
    public B notifyAddress(String host, int port) {
        Objects.requireNonNull(host, "host");
        if (port < 0 || port > 65535) {
            throw new IllegalArgumentException("notify port " + port + " is not a TCP port (0..65535)");
        }
        return with(b -> {
            b.host = host;
            b.port = port;
        });
    }

    /** Signs what it sends and takes only signed messages; {@code null} (the default) for neither. */
    public B auth(NotifyAuth auth) {
        return with(b -> b.auth = auth);
    }

    /** What the notify channel grants peers; default {@link NotifyLimits#DEFAULTS}. */
    public B limits(NotifyLimits limits) {
        Objects.requireNonNull(limits, "limits");
        return with(b -> b.limits = limits);
    }

    /** Where the notify server, client and what the side keeps for its peer report; default nothing. */
    public B notifyRecorder(NotifyRecorder notifyRecorder) {
        Objects.requireNonNull(notifyRecorder, "notifyRecorder");
        return with(b -> b.notifyRecorder = notifyRecorder);
    }

    /**
     * How many KV blocks the side allocates from (default 65,536).
     *
     * @throws IllegalArgumentException if it is not positive
     */
    public B blocks(int blocks) {
        if (blocks < 1) {
            throw new IllegalArgumentException("a " + side + " side needs at least 1 KV block, got " + blocks);
        }
        return with(b -> b.blocks = blocks);
    }

    /**
     * The most blocks one transfer may hold: {@code open} refuses a larger one ({@code TOO_LARGE}), so a few huge
     * requests cannot take every block. Default: no cap beyond the side's blocks.
     *
     * @throws IllegalArgumentException if it is not positive
     */
    public B maxBlocksPerTransfer(int maxBlocksPerTransfer) {
        if (maxBlocksPerTransfer < 1) {
            throw new IllegalArgumentException("the most blocks per transfer must be at least 1, got "
                    + maxBlocksPerTransfer);
        }
        return with(b -> b.maxBlocksPerTransfer = maxBlocksPerTransfer);
    }

    /** The content check {@code write_done} carries (prefill) or is verified with (decode); default none. */
    public B contentCheck(ContentCheck contentCheck) {
        Objects.requireNonNull(contentCheck, "contentCheck");
        return with(b -> b.contentCheck = contentCheck);
    }
}
