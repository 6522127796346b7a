package dev.kvflux.bindings.mori;

import dev.kvflux.bindings.PushTimeline;
import dev.kvflux.bindings.PushedStatus;
import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.internal.PushListeners;
import dev.kvflux.bindings.mori.internal.MoriNative;
import dev.kvflux.bindings.mori.internal.PushCalls;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.concurrent.atomic.AtomicReference;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;

/**
 * The status of a batch posted by an engine that pushes completion ({@link PushMode#ON}): the library completes
 * it as soon as its copies end and {@link #pushed()} emits its code, on the process's one MoRI notification
 * thread ({@code kvflux-mori-push}), without a poll.
 */
public final class PushedMoriStatus extends MoriStatus implements PushedStatus {
    private final PushCalls calls;
    private final Sinks.One<StatusCode> pushed = Sinks.one();
    /** The terminal code once settled (by the push or by the query after registering), once. */
    private final AtomicReference<StatusCode> settled = new AtomicReference<>();
    /**
     * The settled code as listeners learn it: written by the settling thread once the push's stages are, and read by
     * {@link #onPushed}, so that a listener told at once never sees the code before the stages.
     */
    private volatile StatusCode told;
    /** Every listener given to {@link #onPushed}, chained ({@link PushListeners}); null until one is. */
    private volatile java.util.function.Consumer<StatusCode> listener;
    private static final VarHandle LISTENER = PushListeners.field(MethodHandles.lookup(), PushedMoriStatus.class,
            "listener");
    /** The push's stages ({@link #timeline}), written by the settling thread before it tells anyone; 0 for none. */
    private long signalled;
    private long queued;
    private long taken;
    private long returned;
    private long settledAt;
    /** Written last (volatile): once it reads true, the stages above are whole. */
    private volatile boolean byPush;

    PushedMoriStatus(MoriNative lib, MoriEngine engine, long handle, long bytes, PushCalls calls) {
        super(lib, engine, handle, bytes);
        this.calls = calls;
        calls.await(engine.handle(), handle, this::onPush);
        // A batch that ended before it was registered was pushed to nobody: one query tells.
        StatusCode now = code();
        if (now.isTerminal()) {
            calls.forget(handle);
            settle(now, null);
        }
    }

    private void onPush(int code, long copyEndNanos, PushCalls.Stages stages) {
        StatusCode terminal = StatusCode.of(code);
        if (terminal == StatusCode.SUCCESS && copyEndNanos != 0) {
            copiesEndedAt(copyEndNanos);
        }
        settle(terminal, stages);
    }

    /** Settles the status once with {@code code}: by a push ({@code stages}) or a query (null). */
    private void settle(StatusCode code, PushCalls.Stages stages) {
        long now = System.nanoTime();
        if (settled.compareAndSet(null, code)) {
            // written before the listeners are told: whoever learns of the end from them reads them whole
            settledAt = now;
            if (stages != null) {
                signalled = stages.signalled();
                queued = stages.queued();
                taken = stages.taken();
                returned = stages.returned();
                byPush = true;
            }
            told = code; // after the stages: a listener told at once by onPushed finds them whole
            java.util.function.Consumer<StatusCode> l = listener;
            if (l != null) {
                l.accept(code);
            }
            pushed.tryEmitValue(code);
        }
    }

    /** {@inheritDoc} Given on {@code kvflux-mori-push}, or at once if already pushed. */
    @Override
    public boolean onPushed(java.util.function.Consumer<StatusCode> l) {
        PushListeners.add(LISTENER, this, l);
        StatusCode code = told;
        if (code != null) {
            l.accept(code);
        }
        return true;
    }

    /** {@inheritDoc} Once pushed or found terminal by the query after registering; the code listeners are told. */
    @Override
    public StatusCode settledCode() {
        return told;
    }

    /**
     * {@inheritDoc} Over the real MoRI: the host function's run, the shim's thread taking it, the query that found
     * the status done, the shim handing it out, {@code kvflux-mori-push} back in Java, and the settling. On the
     * simulator the copies' end is modelled and its push thread's timer firing stands for the notifier waking.
     */
    @Override
    public PushTimeline timeline() {
        if (!byPush) {
            return PushTimeline.NONE;
        }
        long callback = completedAtNanos();
        return new PushTimeline(callback, known(signalled), known(queued), known(taken), known(returned), settledAt);
    }

    private static long known(long nanos) {
        return nanos == 0 ? UNKNOWN_TIME : nanos;
    }

    /** {@inheritDoc} Emits on {@code kvflux-mori-push}, or at once on the subscriber's thread if already pushed. */
    @Override
    public Mono<StatusCode> pushed() {
        return pushed.asMono();
    }

    @Override
    void release() {
        calls.forget(handle);
        super.release();
    }
}
