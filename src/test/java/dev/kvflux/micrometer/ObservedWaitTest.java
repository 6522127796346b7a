package dev.kvflux.micrometer;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.bindings.BatchPlan;
import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.TransferSession;
import dev.kvflux.bindings.TransferStatus;
import dev.kvflux.bindings.sim.Fault;
import dev.kvflux.bindings.sim.SimulatedXgmiEngine;
import dev.kvflux.operators.CompletionWait;
import io.micrometer.common.KeyValue;
import io.micrometer.observation.Observation;
import io.micrometer.observation.ObservationHandler;
import io.micrometer.observation.ObservationRegistry;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import java.util.stream.StreamSupport;
import org.junit.jupiter.api.Test;
import reactor.test.StepVerifier;
import reactor.test.scheduler.VirtualTimeScheduler;

/** Each wait of an observed strategy is one observation, its metric keys few-valued and the transfer id for traces. */
class ObservedWaitTest {
    private final List<Observation.Context> stopped = new CopyOnWriteArrayList<>();
    private final ObservationRegistry registry = ObservationRegistry.create();

    ObservedWaitTest() {
        registry.observationConfig().observationHandler(new ObservationHandler<>() {
            @Override
            public boolean supportsContext(Observation.Context context) {
                return true;
            }

            @Override
            public void onStop(Observation.Context context) {
                stopped.add(context);
            }
        });
    }

    private static List<TransferStatus> post(VirtualTimeScheduler clock, Fault fault, int batches) {
        SimulatedXgmiEngine.Builder builder = SimulatedXgmiEngine.builder().scheduler(clock);
        if (fault != null) {
            builder.fault(fault);
        }
        SimulatedXgmiEngine engine = builder.build();
        TransferSession session = engine.createSession(engine.registerMemory(1 << 20, 0),
                engine.registerMemory(1 << 20, 1));
        return IntStream.range(0, batches).mapToObj(i -> session.batchWrite(
                BatchPlan.mirrored(new long[] {i * 4096L}, 4096), session.allocateTransferUid())).toList();
    }

    private static Map<String, String> keys(Iterable<KeyValue> values) {
        return StreamSupport.stream(values.spliterator(), false)
                .collect(Collectors.toMap(KeyValue::getKey, KeyValue::getValue));
    }

    @Test
    void aWaitThatSucceedsIsOneObservationWithItsStrategyOutcomeAndTransferId() {
        StepVerifier.withVirtualTime(() -> ObservedWait.of(CompletionWait.failFast(Duration.ofSeconds(30)), registry)
                        .await(post(VirtualTimeScheduler.get(), null, 3))
                        .contextWrite(c -> c.put(ObservedWait.TRANSFER_ID, "t-7")))
                .thenAwait(Duration.ofSeconds(1))
                .expectComplete()
                .verify(Duration.ofSeconds(5));

        assertThat(stopped).singleElement().satisfies(context -> {
            assertThat(context.getName()).isEqualTo("kvflux.wait");
            assertThat(keys(context.getLowCardinalityKeyValues()))
                    .containsExactlyInAnyOrderEntriesOf(Map.of("strategy", "reactive", "outcome", "done"));
            assertThat(keys(context.getHighCardinalityKeyValues()))
                    .containsExactlyInAnyOrderEntriesOf(Map.of("transfer_id", "t-7", "statuses", "3"));
        });
    }

    @Test
    void aFailedWaitCarriesItsOutcomeCodeAndError() {
        Fault second = Fault.fail(1, Duration.ZERO, StatusCode.ERR_RDMA_OP, "link down");
        StepVerifier.withVirtualTime(() -> ObservedWait.of(CompletionWait.failFast(Duration.ofSeconds(30)), registry)
                        .await(post(VirtualTimeScheduler.get(), second, 3)))
                .thenAwait(Duration.ofSeconds(1))
                .expectError()
                .verify(Duration.ofSeconds(5));

        assertThat(stopped).singleElement().satisfies(context -> {
            assertThat(keys(context.getLowCardinalityKeyValues())).containsExactlyInAnyOrderEntriesOf(
                    Map.of("strategy", "reactive", "outcome", "failed", "code", "ERR_RDMA_OP"));
            assertThat(context.getError()).hasMessageContaining("link down");
            assertThat(keys(context.getHighCardinalityKeyValues())).doesNotContainKey("transfer_id");
        });
    }
}
