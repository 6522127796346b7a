package dev.kvflux.operators;

import dev.kvflux.bindings.TransferStatus;
import java.util.List;
import java.util.Objects;
import org.reactivestreams.Publisher;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * A way to wait for a request's statuses: kvflux's reactive {@link CompletionWait} (polled, or with the shared
 * poll), {@link PushWait} for engines that push completion, or one of the two reference strategies they are
 * measured against ({@link NativeWait}, {@link SlicedNativeWait}). Each is made from a {@link WaitSpec}.
 */
public interface WaitStrategy {

    /** {@link CompletionWait}'s name. */
    String REACTIVE = "reactive";
    /** {@link CompletionWait}'s name with {@link CompletionWait#sharedPoll()}. */
    String REACTIVE_SHARED = "reactive-shared";
    /** {@link CompletionWait}'s name with {@link CompletionWait#adaptive(CopyRate)}. */
    String REACTIVE_ADAPTIVE = "reactive-adaptive";
    /** {@link PushWait}'s name. */
    String REACTIVE_PUSH = "reactive-push";
    /** {@link PushWait}'s name with {@link PushWait#signalOnPush()}. */
    String REACTIVE_PUSH_DIRECT = "reactive-push-direct";
    /** {@link NativeWait}'s name: one native wait with the whole timeout. */
    String NATIVE = "native";
    /** {@link SlicedNativeWait}'s name: the native wait in slices, vLLM's fix. */
    String SLICED_NATIVE = "sliced-native";

    /**
     * The name the strategy reports under, in {@link WaitRecorder} calls and in its publishers' {@code strategy}
     * tag: one of {@link #REACTIVE}, {@link #REACTIVE_SHARED}, {@link #REACTIVE_ADAPTIVE}, {@link #REACTIVE_PUSH},
     * {@link #NATIVE} and
     * {@link #SLICED_NATIVE} for kvflux's own, whatever it says for a strategy from elsewhere.
     */
    String strategyName();

    /**
     * A {@code Mono} that completes when every status succeeded and errors with a
     * {@link TransferException} otherwise. Nothing happens until it is subscribed. A status that breaks
     * the {@link TransferStatus} contract (null in the list, or a {@code code()} that throws or returns
     * null) ends the wait with a {@link TransferException} whose code is
     * {@link dev.kvflux.bindings.StatusCode#ERR_BAD_STATE} and whose cause is what was thrown.
     */
    Mono<Void> await(List<? extends TransferStatus> statuses);

    /**
     * The same wait over the statuses {@code statuses} emits, so that a flow of statuses can end in
     * {@code statuses.as(wait::awaitAll)}. The statuses are collected until the publisher completes, then
     * waited for as {@link #await} does: the wait (its first query, its transfer timeout) starts once the
     * publisher has completed. An empty publisher completes at once, as an empty list does. An error from
     * the publisher is passed on as it is, and no status is waited for. Cancelling cancels the publisher
     * while it still emits, and the wait afterwards. kvflux's strategies name and tag this {@code Mono} as
     * they do {@link #await}'s.
     */
    default Mono<Void> awaitAll(Publisher<? extends TransferStatus> statuses) {
        Objects.requireNonNull(statuses, "statuses");
        return WaitRecording.namedAsAwait(this, Flux.<TransferStatus>from(statuses).collectList().flatMap(this::await));
    }

    /**
     * This strategy, reporting each wait to {@code recorder} (see {@link WaitRecorder} for what and when);
     * {@link WaitRecorder#NOOP} turns recording off. Instances are immutable: this returns a changed copy.
     * kvflux's strategies count polls and queries inside the wait; for a strategy from elsewhere this
     * default reports around it, as the native strategies do: its start, its end and outcome, its failed
     * statuses (queried once more at the end), its detection lag, no polls, its duration on
     * {@code Schedulers.parallel()}'s clock.
     */
    default WaitStrategy recorder(WaitRecorder recorder) {
        return WaitRecording.recorded(this, recorder);
    }
}
