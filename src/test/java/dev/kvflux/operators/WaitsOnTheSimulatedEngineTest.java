package dev.kvflux.operators;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.TransferSession;
import dev.kvflux.bindings.TransferStatus;
import dev.kvflux.bindings.sim.SimulatedXgmiEngine;
import dev.kvflux.testing.Blocking;
import dev.kvflux.testing.SeedGeometry;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import reactor.test.scheduler.VirtualTimeScheduler;

class WaitsOnTheSimulatedEngineTest {
    private static final Duration TIMEOUT = Duration.ofSeconds(30);

    private final VirtualTimeScheduler clock = VirtualTimeScheduler.create();
    private final SimulatedXgmiEngine engine = SimulatedXgmiEngine.builder().scheduler(clock).build();
    private final TransferSession session = engine.createSession(
            engine.registerMemory(SeedGeometry.SEED.regionBytes(), 0),
            engine.registerMemory(SeedGeometry.SEED.regionBytes(), 1));

    private Duration now() {
        return Duration.ofNanos(clock.now(TimeUnit.NANOSECONDS));
    }

    @Test
    void theNativeWaitCostsTheWholeTimeoutAndFailsInProgressWhileTheReactiveWaitCostsTheCopyTime() {
        AtomicReference<StatusCode> nativeOutcome = new AtomicReference<>(StatusCode.SUCCESS);
        List<TransferStatus> first = SeedGeometry.writeAll(session);
        Duration start = now();
        CompletableFuture<Duration> nativeWait = Blocking.start(
                () -> NativeWait.of(engine, TIMEOUT).await(first)
                        .doOnError(TransferException.class, e -> nativeOutcome.set(e.code()))
                        .onErrorComplete()
                        .then(reactor.core.publisher.Mono.fromCallable(this::now))
                        .block());
        Blocking.awaitTrue(() -> engine.sleepingWaits() == 1);
        clock.advanceTimeBy(TIMEOUT.minusNanos(1));
        Blocking.assertStillBlocked(nativeWait);
        clock.advanceTimeBy(Duration.ofNanos(1));
        Duration nativeCost = Blocking.result(nativeWait).minus(start);

        List<TransferStatus> second = SeedGeometry.writeAll(session);
        Duration restart = now();
        CompletableFuture<Duration> reactive = CompletionWait.failFast(TIMEOUT).scheduler(clock)
                .await(second).then(reactor.core.publisher.Mono.fromCallable(this::now)).toFuture();
        clock.advanceTimeBy(Duration.ofSeconds(1));
        Duration reactiveCost = Blocking.result(reactive).minus(restart);

        assertThat(nativeCost).isEqualTo(TIMEOUT);
        assertThat(nativeOutcome).as("under virtual time nothing is left for the statuses after the first in flight")
                .hasValue(StatusCode.IN_PROGRESS);
        assertThat(first).allSatisfy(s -> assertThat(s.code()).isEqualTo(StatusCode.SUCCESS));
        assertThat(reactiveCost).isBetween(Duration.ofMillis(183), Duration.ofMillis(210));
        assertThat(second).allSatisfy(s -> assertThat(s.code()).isEqualTo(StatusCode.SUCCESS));
    }

    @Test
    void theDetectionLagOnTheSimulatedEngineIsNonNegativeAndWithinOneSliceOfTheLastCopy() {
        dev.kvflux.testing.RecordingWaitRecorder recorder = new dev.kvflux.testing.RecordingWaitRecorder();
        Duration slice = Duration.ofMillis(7);
        for (int request = 0; request < 5; request++) {
            List<TransferStatus> statuses = SeedGeometry.writeAll(session);
            CompletableFuture<Void> done = CompletionWait.failFast(TIMEOUT).slice(slice).scheduler(clock)
                    .recorder(recorder).await(statuses).toFuture();
            clock.advanceTimeBy(Duration.ofSeconds(1));
            Blocking.result(done);
            long lastCopy = statuses.stream().mapToLong(s -> engine.copyFinishedAt(s).orElseThrow()).max().orElseThrow();
            assertThat(statuses).allSatisfy(s -> assertThat(s.completedAtNanos())
                    .isEqualTo(engine.copyFinishedAt(s).orElseThrow()));
            assertThat(recorder.lags.get(request)).as("the copy ended %s ns in", lastCopy)
                    .isBetween(Duration.ZERO, slice);
        }
        assertThat(recorder.lags).hasSize(5).as("not all copies end on a slice boundary").anySatisfy(
                lag -> assertThat(lag).isPositive());
    }
}
