package dev.kvflux.pipeline.serve;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.bindings.sim.SimulatedXgmiEngine;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import reactor.test.scheduler.VirtualTimeScheduler;

/** The simulated prefill engine on virtual time. */
class PrefillLoopTest {

    @Test
    void stepsTakePromptsInOrderUpToTheTokenBudgetLastTokensOverRateAndAreQueuedAhead() {
        VirtualTimeScheduler clock = VirtualTimeScheduler.create();
        ServingModel model = new ServingModel("test", 1000, 100, 2, Duration.ofMillis(1), 16, 8);
        Map<String, Long> doneAtMs = new ConcurrentHashMap<>();
        Map<String, List<Duration>> lastStep = new ConcurrentHashMap<>();
        try (SimulatedXgmiEngine engine = SimulatedXgmiEngine.builder().scheduler(clock).build();
             PrefillLoop loop = new PrefillLoop(model, engine, clock)) {
            for (var job : List.of(Map.entry("a", 60), Map.entry("b", 60), Map.entry("c", 150))) {
                loop.submit(job.getValue(), (startsIn, length) -> lastStep.put(job.getKey(), List.of(startsIn, length)))
                        .subscribe(null, null, () -> doneAtMs.put(job.getKey(), clock.now(TimeUnit.MILLISECONDS)));
            }

            clock.advanceTimeBy(Duration.ofSeconds(1));

            // a finds the engine idle and runs alone at once: 60 ms. Each later step is queued 5 ms before
            // the running one ends: b (60) + 40 of c, 100 ms; then 100 of c (the budget), 100 ms; then
            // c's last 10 tokens, 10 ms.
            assertThat(doneAtMs).containsExactlyInAnyOrderEntriesOf(Map.of("a", 60L, "b", 160L, "c", 270L));
            assertThat(lastStep).containsExactlyInAnyOrderEntriesOf(Map.of(
                    "a", List.of(Duration.ZERO, Duration.ofMillis(60)),
                    "b", List.of(Duration.ofMillis(5), Duration.ofMillis(100)),
                    "c", List.of(Duration.ofMillis(5), Duration.ofMillis(10))));
            assertThat(loop.steps()).isEqualTo(4);
        }
    }
}
