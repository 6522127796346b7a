package dev.kvflux.transfer;

import dev.kvflux.transfer.notify.NotifyAuth;
import dev.kvflux.transfer.notify.NotifyClient;
import dev.kvflux.transfer.notify.NotifyLimits;
import dev.kvflux.transfer.notify.NotifyRecorder;
import dev.kvflux.transfer.notify.NotifyServer;
import java.util.Objects;
import java.util.function.Consumer;
import reactor.core.scheduler.Scheduler;
import reactor.netty.resources.LoopResources;

/**
 * What both sides of a transfer are built with: where their notify server listens, the secret they sign with, what
 * their notify channel grants peers and where it reports, their blocks, the most one transfer may hold, the
 * content check, the scheduler their timers run on and the event loops of their notify channel. Immutable, as the sides' builders ({@link PrefillSide.Builder}, {@link DecodeSide.Builder}) are:
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
    Scheduler scheduler;
    LoopResources loops;
    TransferHistory history = TransferHistory.NONE;

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
        scheduler = from.scheduler;
        loops = from.loops;
        history = from.history;
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

    /**
     * The scheduler every timer of the side runs on and every time it keeps is read from: the receive deadline, the
     * block lease and the reaper that frees blocks at it (decode), the transfer's deadline, the wait for decode's
     * block list, the layers' events in READ mode and the read lease (prefill), and the notify client's retries,
     * backoff and acknowledgement timeouts (both). Give a {@code VirtualTimeScheduler} to test all of them in
     * virtual time, and give the WRITE pipeline's wait the same scheduler. Default: {@code Schedulers.parallel()},
     * looked up at each use, and {@link System#nanoTime()}. Blocking calls ({@code close}) wait in real time; the
     * notify connections' own timers (a frame's read timeout, idle connections) run on their event loops.
     */
    public B scheduler(Scheduler scheduler) {
        Objects.requireNonNull(scheduler, "scheduler");
        return with(b -> b.scheduler = scheduler);
    }

    /**
     * The event loops the side's notify server and client run on. The caller owns them: dispose of them after
     * closing the side. Default: the notify servers' own process-wide daemon loops (half the cores, at least two)
     * for the server, and Reactor Netty's global TCP resources for the client.
     */
    public B loops(LoopResources loops) {
        Objects.requireNonNull(loops, "loops");
        return with(b -> b.loops = loops);
    }

    /**
     * Where every transfer's history goes, event by event: opened, the messages sent, taken and dropped with their
     * incarnations, the writes into decode's blocks, the ends and the blocks freed. Default none.
     */
    public B history(TransferHistory history) {
        Objects.requireNonNull(history, "history");
        return with(b -> b.history = history);
    }

    /** The side's clock and timers, from {@link #scheduler}. */
    final SideClock clock() {
        return new SideClock(scheduler);
    }

    /** The side's notify client: signed, recorded, on the scheduler and the loops when they were given. */
    final NotifyClient notifyClient() {
        NotifyClient.Builder client = NotifyClient.builder().recorder(notifyRecorder).auth(auth);
        client = scheduler != null ? client.scheduler(scheduler) : client;
        return (loops != null ? client.loops(loops) : client).build();
    }

    /** The side's notify server, on the loops when they were given. */
    final NotifyServer.Builder notifyServer() {
        NotifyServer.Builder server = NotifyServer.builder();
        return loops != null ? server.loops(loops) : server;
    }
}
