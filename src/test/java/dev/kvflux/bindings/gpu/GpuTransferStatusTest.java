package dev.kvflux.bindings.gpu;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.bindings.EventState;
import dev.kvflux.bindings.LayerEvent;
import dev.kvflux.bindings.PushTimeline;
import dev.kvflux.bindings.StatusCode;
import dev.kvflux.operators.PushWait;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import reactor.test.StepVerifier;

/** The batch status's completion model, over a fake completion event. */
class GpuTransferStatusTest {

    /** A completion event the test completes or fails; counts queries. */
    private static final class FakeEvent implements LayerEvent {
        volatile EventState state = EventState.NOT_READY;
        volatile RuntimeException failure;
        final AtomicInteger queries = new AtomicInteger();

        @Override
        public EventState query() {
            queries.incrementAndGet();
            if (failure != null) {
                throw failure;
            }
            return state;
        }
    }

    private final FakeEvent event = new FakeEvent();
    private final List<LayerEvent> released = new ArrayList<>();

    private GpuTransferStatus posted() {
        GpuTransferStatus status = new GpuTransferStatus(7);
        status.posted(event, released::add, () -> event.state = EventState.READY);
        return status;
    }

    /** A status posted with a host function behind its batch (its key is never launched here). */
    private GpuTransferStatus pushing() {
        GpuTransferStatus status = posted();
        status.pushedBy(42);
        return status;
    }

    @Test
    void aNewStatusIsInitUntilPosted() {
        assertThat(new GpuTransferStatus(1).code()).isEqualTo(StatusCode.INIT);
    }

    @Test
    void aPostedStatusStaysInProgressWhileItsEventIsNotReady() {
        GpuTransferStatus status = posted();
        assertThat(status.code()).isEqualTo(StatusCode.IN_PROGRESS);
        assertThat(released).isEmpty();
    }

    @Test
    void theStatusCompletesOnlyWhenAQueryFindsItsEventReady() {
        GpuTransferStatus status = posted();
        event.state = EventState.READY;
        assertThat(event.queries).hasValue(0);
        assertThat(status.code()).isEqualTo(StatusCode.SUCCESS);
        assertThat(status.code()).isEqualTo(StatusCode.SUCCESS);
        assertThat(event.queries).hasValue(1);
    }

    @Test
    void theEventGoesBackToItsPoolOnceWhenTheStatusCompletes() {
        GpuTransferStatus status = posted();
        event.state = EventState.READY;
        status.code();
        status.code();
        assertThat(released).containsExactly(event);
    }

    @Test
    void aFailedEventFailsTheStatusWithTheRuntimesMessage() {
        GpuTransferStatus status = posted();
        event.failure = new IllegalStateException("cudaEventQuery failed: cudaErrorLaunchFailure (719)");
        assertThat(status.code()).isEqualTo(StatusCode.ERR_GPU_OP);
        assertThat(status.message()).contains("cudaErrorLaunchFailure");
    }

    @Test
    void failureIsSticky() {
        GpuTransferStatus status = posted();
        status.fail(StatusCode.ERR_GPU_OP, "posting failed");
        event.state = EventState.READY;
        assertThat(status.code()).isEqualTo(StatusCode.ERR_GPU_OP);
        assertThat(status.message()).isEqualTo("posting failed");
    }

    @Test
    void thePushEmitsTheTerminalCodeWithoutAnyoneQuerying() {
        GpuTransferStatus status = posted();
        StepVerifier.create(status.pushed())
                .then(() -> {
                    event.state = EventState.READY;
                    status.hostFunctionRan(System.nanoTime());
                })
                .expectNext(StatusCode.SUCCESS)
                .verifyComplete();
    }

    @Test
    void aStatusSaysItsCodeWithoutAQueryOnlyOnceSettled() {
        GpuTransferStatus status = posted();
        event.state = EventState.READY;
        assertThat(status.settledCode()).as("its event is ready, but nothing settled it yet").isNull();
        assertThat(event.queries).as("saying costs no query").hasValue(0);
        status.hostFunctionRan(12_345L);
        assertThat(status.settledCode()).isEqualTo(StatusCode.SUCCESS);
        assertThat(status.completedAtNanos()).as("as readable as after a push").isEqualTo(12_345L);

        GpuTransferStatus queried = posted();
        queried.code();
        assertThat(queried.settledCode()).as("settled by a query").isEqualTo(StatusCode.SUCCESS);

        GpuTransferStatus failed = posted();
        failed.fail(StatusCode.ERR_GPU_OP, "posting failed");
        assertThat(failed.settledCode()).isEqualTo(StatusCode.ERR_GPU_OP);
    }

    @Test
    void aPushBeforeTheEventReadsReadyFallsBackToTheBlockingWait() {
        GpuTransferStatus status = posted();
        status.hostFunctionRan(System.nanoTime());
        assertThat(status.code()).isEqualTo(StatusCode.SUCCESS);
    }

    @Test
    void aSubscriberAfterCompletionGetsTheCodeAtOnce() {
        GpuTransferStatus status = posted();
        event.state = EventState.READY;
        status.code();
        StepVerifier.create(status.pushed()).expectNext(StatusCode.SUCCESS).verifyComplete();
    }

    @Test
    void aPushedStatusSaysItsCopiesEndedWhenItsHostFunctionRan() {
        GpuTransferStatus status = posted();
        event.state = EventState.READY;
        assertThat(status.completedAtNanos()).as("in flight").isEqualTo(GpuTransferStatus.UNKNOWN_TIME);
        status.hostFunctionRan(12_345L);
        assertThat(status.code()).isEqualTo(StatusCode.SUCCESS);
        assertThat(status.completedAtNanos()).isEqualTo(12_345L);
    }

    @Test
    void aStatusPostedWithoutAHostFunctionTakesNoListenerWhileInFlightSoThatAWaitQueriesIt() {
        GpuTransferStatus polled = posted();
        assertThat(polled.onPushed(code -> { })).as("no push will come: a wait must query it").isFalse();

        event.state = EventState.READY;
        StepVerifier.create(PushWait.failFast(Duration.ofSeconds(30)).await(List.of(polled)))
                .expectComplete()
                .verify(Duration.ofSeconds(5));
        assertThat(polled.onPushed(code -> { })).as("settled: told at once").isTrue();
    }

    @Test
    void aStatusItsHostFunctionSettledKnowsThePushsStagesAndOneSettledByAQueryHasNone() {
        GpuTransferStatus pushed = posted();
        event.state = EventState.READY;
        pushed.hostFunctionRan(12_345L); // the runtime's time of the host function, as HostFunctions hands it over

        PushTimeline t = pushed.timeline();
        assertThat(t.callbackRan()).isEqualTo(12_345L);
        assertThat(t.notifierWoke()).as("the dispatch thread's taking of it").isNotEqualTo(GpuTransferStatus.UNKNOWN_TIME);
        assertThat(t.settled()).as("settled after it was taken").isGreaterThanOrEqualTo(t.notifierWoke());
        assertThat(t.queued()).as("the engine has no queue of its own").isEqualTo(GpuTransferStatus.UNKNOWN_TIME);

        GpuTransferStatus queried = new GpuTransferStatus(8);
        FakeEvent done = new FakeEvent();
        done.state = EventState.READY;
        queried.posted(done, released::add, () -> { });
        queried.code();
        queried.hostFunctionRan(12_345L);
        assertThat(queried.timeline()).isEqualTo(PushTimeline.NONE);
    }

    @Test
    void aStatusSettledByAQueryCannotSayWhenItsCopiesEnded() {
        GpuTransferStatus status = posted();
        event.state = EventState.READY;
        status.code();
        status.hostFunctionRan(12_345L);
        assertThat(status.completedAtNanos()).isEqualTo(GpuTransferStatus.UNKNOWN_TIME);
    }

    @Test
    void aFailedStatusHasNoCompletionTime() {
        GpuTransferStatus status = posted();
        status.fail(StatusCode.ERR_GPU_OP, "posting failed");
        status.hostFunctionRan(12_345L);
        assertThat(status.code()).isEqualTo(StatusCode.ERR_GPU_OP);
        assertThat(status.completedAtNanos()).isEqualTo(GpuTransferStatus.UNKNOWN_TIME);
    }

    @Test
    void theListenerIsGivenThePushedCodeWithoutAnyoneQuerying() {
        GpuTransferStatus status = pushing();
        List<StatusCode> heard = new CopyOnWriteArrayList<>();
        assertThat(status.onPushed(heard::add)).as("the listener form is offered").isTrue();
        assertThat(heard).as("in flight").isEmpty();

        event.state = EventState.READY;
        status.hostFunctionRan(System.nanoTime());

        assertThat(heard).containsExactly(StatusCode.SUCCESS);
    }

    @Test
    void everyListenerIsToldNotOnlyTheLastOneSet() {
        GpuTransferStatus status = pushing();
        List<String> heard = new CopyOnWriteArrayList<>();
        status.onPushed(code -> heard.add("first " + code));
        status.onPushed(code -> heard.add("second " + code));

        event.state = EventState.READY;
        status.hostFunctionRan(System.nanoTime());

        assertThat(heard).containsExactlyInAnyOrder("first SUCCESS", "second SUCCESS");
    }

    @Test
    void aListenerSetOnceTheStatusSettledIsGivenItsCodeAtOnce() {
        GpuTransferStatus status = posted();
        status.fail(StatusCode.ERR_GPU_OP, "posting failed");
        List<StatusCode> heard = new CopyOnWriteArrayList<>();

        status.onPushed(heard::add);

        assertThat(heard).containsExactly(StatusCode.ERR_GPU_OP);
    }

    @Test
    void aFailedBatchIsToldToTheListener() {
        GpuTransferStatus status = pushing();
        List<StatusCode> heard = new CopyOnWriteArrayList<>();
        status.onPushed(heard::add);

        status.fail(StatusCode.ERR_GPU_OP, "cudaErrorLaunchFailure");

        assertThat(heard).containsExactly(StatusCode.ERR_GPU_OP);
    }

    @Test
    void aPushWaitOnAGpuStatusEndsWhenItsHostFunctionRunsWithNoPoll() {
        GpuTransferStatus status = pushing();
        StepVerifier.create(PushWait.failFast(Duration.ofSeconds(30)).await(List.of(status)))
                .then(() -> {
                    event.state = EventState.READY;
                    status.hostFunctionRan(System.nanoTime());
                })
                .expectComplete()
                .verify(Duration.ofSeconds(30));
        assertThat(event.queries).as("the wait's one look at subscription (in flight then) and the host function's;"
                + " never polled").hasValue(2);
    }
}
