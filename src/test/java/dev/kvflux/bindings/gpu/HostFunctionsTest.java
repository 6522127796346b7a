package dev.kvflux.bindings.gpu;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.bindings.EventState;
import dev.kvflux.bindings.LayerEvent;
import dev.kvflux.bindings.StatusCode;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;

/**
 * How long a host function's callback is kept, without a GPU: the test plays the runtime by calling
 * {@link HostFunctions#dispatch} as the upcall would. The dispatch thread runs callbacks in order, so once
 * a later callback has run, an earlier dropped one would have run before it if it had been kept.
 */
class HostFunctionsTest {
    private final Object stream = new Object();
    private final AtomicBoolean ran = new AtomicBoolean();

    /** Dispatches a sentinel behind everything dispatched so far and waits until it has run. */
    private static void drainDispatch() throws InterruptedException {
        CountDownLatch done = new CountDownLatch(1);
        HostFunctions.dispatch(HostFunctions.register(new Object(), done::countDown));
        assertThat(done.await(5, TimeUnit.SECONDS)).isTrue();
    }

    @Test
    void aTimedCallbackIsGivenTheTimeItsHostFunctionRanNotTheTimeItWasDispatched() throws Exception {
        CountDownLatch done = new CountDownLatch(1);
        long[] given = new long[1];
        long key = HostFunctions.registerTimed(stream, ranAt -> {
            given[0] = ranAt;
            done.countDown();
        });
        long before = System.nanoTime();
        HostFunctions.dispatch(key);
        long after = System.nanoTime();
        assertThat(done.await(5, TimeUnit.SECONDS)).isTrue();
        assertThat(given[0]).isBetween(before, after);
    }

    @Test
    void aCallbackRunsOnTheDispatchThreadWhenItsHostFunctionRuns() throws Exception {
        CountDownLatch done = new CountDownLatch(1);
        String[] thread = new String[1];
        HostFunctions.dispatch(HostFunctions.register(stream, () -> {
            thread[0] = Thread.currentThread().getName();
            done.countDown();
        }));
        assertThat(done.await(5, TimeUnit.SECONDS)).isTrue();
        assertThat(thread[0]).isEqualTo("kvflux-gpu-host-functions");
    }

    @Test
    void callbacksOfAClosedStreamAreDroppedAndOtherStreamsKeepTheirs() throws Exception {
        Object other = new Object();
        AtomicBoolean otherRan = new AtomicBoolean();
        long closedKey = HostFunctions.register(stream, () -> ran.set(true));
        long otherKey = HostFunctions.register(other, () -> otherRan.set(true));

        HostFunctions.forget(stream);
        HostFunctions.dispatch(closedKey);
        HostFunctions.dispatch(otherKey);
        drainDispatch();

        assertThat(ran).isFalse();
        assertThat(otherRan).isTrue();
    }

    @Test
    void aStatusSettledByAQueryNoLongerKeepsItsCallback() throws Exception {
        EventState[] state = {EventState.NOT_READY};
        LayerEvent event = () -> state[0];
        GpuTransferStatus status = new GpuTransferStatus(1);
        status.posted(event, e -> { }, () -> { });
        long key = HostFunctions.register(stream, () -> ran.set(true));
        status.pushedBy(key);

        state[0] = EventState.READY;
        assertThat(status.code()).isEqualTo(StatusCode.SUCCESS);
        HostFunctions.dispatch(key);
        drainDispatch();

        assertThat(ran).isFalse();
    }

    @Test
    void aStatusThatFailsNoLongerKeepsItsCallback() throws Exception {
        GpuTransferStatus status = new GpuTransferStatus(2);
        status.posted(() -> EventState.NOT_READY, e -> { }, () -> { });
        long key = HostFunctions.register(stream, () -> ran.set(true));
        status.pushedBy(key);

        status.fail(StatusCode.ERR_GPU_OP, "device fault");
        HostFunctions.dispatch(key);
        drainDispatch();

        assertThat(ran).isFalse();
    }

    @Test
    void aStatusAlreadySettledWhenItsHostFunctionIsTiedToItDropsTheCallbackAtOnce() throws Exception {
        GpuTransferStatus status = new GpuTransferStatus(3);
        status.posted(() -> EventState.READY, e -> { }, () -> { });
        assertThat(status.code()).isEqualTo(StatusCode.SUCCESS);
        long key = HostFunctions.register(stream, () -> ran.set(true));

        status.pushedBy(key);
        HostFunctions.dispatch(key);
        drainDispatch();

        assertThat(ran).isFalse();
    }
}
