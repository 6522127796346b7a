package dev.kvflux.operators;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.bindings.StatusCode;
import dev.kvflux.testing.RecordingEngine;
import dev.kvflux.testing.ScriptedStatus;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import reactor.core.observability.micrometer.Micrometer;
import reactor.core.publisher.Flux;
import reactor.core.scheduler.Schedulers;
import reactor.test.StepVerifier;
import reactor.test.scheduler.VirtualTimeScheduler;

/** Every wait's publisher is named and tagged, so Reactor's own Micrometer metrics name their meters after it. */
class ReactorMetricsTapTest {
    private final SimpleMeterRegistry registry = new SimpleMeterRegistry();

    private boolean flowTimed(String strategy, String failMode, String status) {
        return registry.find("kvflux.wait.flow.duration")
                .tags("strategy", strategy, "fail_mode", failMode, "status", status).timer() != null;
    }

    @Test
    void aTappedCompletionWaitYieldsKvfluxWaitMetersTaggedWithItsStrategyAndFailMode() {
        StepVerifier.withVirtualTime(() -> CompletionWait.failFast(Duration.ofSeconds(1)).sharedPoll()
                        .await(List.of(ScriptedStatus.succeedsAt(VirtualTimeScheduler.get(), Duration.ofMillis(20))))
                        .tap(Micrometer.metrics(registry)))
                .expectSubscription()
                .thenAwait(Duration.ofMillis(20))
                .verifyComplete();
        StepVerifier.withVirtualTime(() -> CompletionWait.drain(Duration.ofSeconds(1))
                        .await(List.of(ScriptedStatus.failsAt(VirtualTimeScheduler.get(), Duration.ofMillis(20),
                                StatusCode.ERR_RDMA_OP, "nic")))
                        .tap(Micrometer.metrics(registry)))
                .expectSubscription()
                .thenAwait(Duration.ofMillis(20))
                .expectError(TransferException.class)
                .verify(Duration.ofSeconds(5));

        assertThat(registry.find("kvflux.wait.subscribed").tags("strategy", "reactive-shared", "fail_mode", "fail_fast")
                .counter()).isNotNull();
        assertThat(flowTimed("reactive-shared", "fail_fast", "completedEmpty")).isTrue();
        assertThat(registry.find("kvflux.wait.flow.duration").tags("strategy", "reactive", "fail_mode", "drain",
                "status", "error", "exception", TransferException.class.getName()).timer()).isNotNull();
    }

    @Test
    void everyStrategyIsTaggedAndAwaitAllIsTaggedToo() {
        VirtualTimeScheduler clock = VirtualTimeScheduler.create();
        RecordingEngine engine = new RecordingEngine(clock);
        List<WaitStrategy> waits = List.of(PushWait.drain(Duration.ofSeconds(1)),
                NativeWait.of(engine, Duration.ofSeconds(1)).scheduler(Schedulers.immediate()),
                SlicedNativeWait.failFast(engine, Duration.ofSeconds(1)).scheduler(Schedulers.immediate()).clock(clock),
                CompletionWait.failFast(Duration.ofSeconds(1)));
        for (WaitStrategy wait : waits) {
            Flux.just(ScriptedStatus.succeedsAt(clock, Duration.ZERO)).as(wait::awaitAll)
                    .tap(Micrometer.metrics(registry)).block(Duration.ofSeconds(5));
        }

        assertThat(flowTimed("reactive-push", "drain", "completedEmpty")).isTrue();
        assertThat(flowTimed("native", "none", "completedEmpty")).isTrue();
        assertThat(flowTimed("sliced-native", "fail_fast", "completedEmpty")).isTrue();
        assertThat(flowTimed("reactive", "fail_fast", "completedEmpty")).isTrue();
    }
}
