package dev.kvflux.serving.role;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

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
             PrefillLoop loop = new PrefillLoop(model, engine::prefillStepQueued, clock)) {
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

    @Test
    void promptsBeyondTheQueueBoundAreRefusedAtOnceAndAdmittedAgainOnceItDrains() {
        VirtualTimeScheduler clock = VirtualTimeScheduler.create();
        ServingModel model = new ServingModel("test", 1000, 100, 2, Duration.ofMillis(1), 16, 8);
        try (SimulatedXgmiEngine engine = SimulatedXgmiEngine.builder().scheduler(clock).build();
             PrefillLoop loop = new PrefillLoop(model, engine::prefillStepQueued, clock, PrefillLoop.DEFAULT_LAUNCH_AHEAD, 2)) {
            List<String> done = new java.util.concurrent.CopyOnWriteArrayList<>();
            // a fills the first step at once and leaves the queue; b and c wait for the next steps
            for (String name : List.of("a", "b", "c")) {
                loop.submit(100, (startsIn, length) -> { }).subscribe(null, null, () -> done.add(name));
            }

            assertThatThrownBy(() -> loop.submit(100, (startsIn, length) -> { }))
                    .isInstanceOf(PrefillLoop.QueueFullException.class)
                    .hasMessageContaining("overloaded").hasMessageContaining("2 prompts");

            clock.advanceTimeBy(Duration.ofSeconds(1));
            assertThat(done).as("the refused prompt was never queued").containsExactly("a", "b", "c");
            loop.submit(100, (startsIn, length) -> { }).subscribe(null, null, () -> done.add("e"));
            clock.advanceTimeBy(Duration.ofSeconds(1));
            assertThat(done).containsExactly("a", "b", "c", "e");
        }
    }

    @Test
    void aCancelledPromptLeavesTheQueueAndNoStepSpendsTimeOnIt() {
        VirtualTimeScheduler clock = VirtualTimeScheduler.create();
        ServingModel model = new ServingModel("test", 1000, 100, 2, Duration.ofMillis(1), 16, 8);
        try (SimulatedXgmiEngine engine = SimulatedXgmiEngine.builder().scheduler(clock).build();
             PrefillLoop loop = new PrefillLoop(model, engine::prefillStepQueued, clock, PrefillLoop.DEFAULT_LAUNCH_AHEAD, 2)) {
            List<String> lastSteps = new java.util.concurrent.CopyOnWriteArrayList<>();
            Map<String, Long> doneAtMs = new ConcurrentHashMap<>();
            // a runs alone at once (100 ms); b (300 tokens) would take the next three steps, c the one after
            loop.submit(100, (startsIn, length) -> lastSteps.add("a")).subscribe();
            reactor.core.Disposable b = loop.submit(300, (startsIn, length) -> lastSteps.add("b")).subscribe();
            loop.submit(50, (startsIn, length) -> lastSteps.add("c"))
                    .subscribe(null, null, () -> doneAtMs.put("c", clock.now(TimeUnit.MILLISECONDS)));
            clock.advanceTimeBy(Duration.ofMillis(10));
            assertThat(loop.waiting()).isEqualTo(2);

            b.dispose();
            clock.advanceTimeBy(Duration.ofSeconds(1));

            assertThat(lastSteps).as("b's last step is never formed").containsExactly("a", "c");
            // c runs right after a: 100 ms + 50 ms, not after b's 300 tokens
            assertThat(doneAtMs).containsEntry("c", 150L);
            assertThat(loop.waiting()).as("b's place in the queue bound is given back").isZero();
        }
    }

    @Test
    void aLastStepCallbackThatThrowsDoesNotStrandTheOtherPromptsOfItsStep() {
        VirtualTimeScheduler clock = VirtualTimeScheduler.create();
        ServingModel model = new ServingModel("test", 1000, 100, 2, Duration.ofMillis(1), 16, 8);
        try (SimulatedXgmiEngine engine = SimulatedXgmiEngine.builder().scheduler(clock).build();
             PrefillLoop loop = new PrefillLoop(model, engine::prefillStepQueued, clock)) {
            List<String> lastSteps = new java.util.concurrent.CopyOnWriteArrayList<>();
            List<String> ended = new java.util.concurrent.CopyOnWriteArrayList<>();
            // a and b (40 tokens each) are formed in one step; a's callback fails
            loop.submit(40, (startsIn, length) -> {
                throw new IllegalStateException("a's write could not start");
            }).subscribe(null, e -> ended.add("a failed"), () -> ended.add("a"));
            loop.submit(40, (startsIn, length) -> lastSteps.add("b"))
                    .subscribe(null, e -> ended.add("b failed"), () -> ended.add("b"));

            clock.advanceTimeBy(Duration.ofSeconds(1));

            assertThat(lastSteps).as("b's write still starts").containsExactly("b");
            assertThat(ended).as("every prompt of the step ends").containsExactlyInAnyOrder("a failed", "b");
        }
    }

    @Test
    void aClientsShortPromptIsNotKeptBehindAnotherClientsLongOnes() {
        VirtualTimeScheduler clock = VirtualTimeScheduler.create();
        // 100 tokens a step at 1,000 tokens a second: a full step lasts 100 ms
        ServingModel model = new ServingModel("test", 1000, 100, 2, Duration.ofMillis(1), 16, 8);
        List<Duration> steps = new java.util.concurrent.CopyOnWriteArrayList<>();
        Map<String, Long> doneAtMs = new ConcurrentHashMap<>();
        try (PrefillLoop loop = new PrefillLoop(model, steps::add, clock, PrefillLoop.DEFAULT_LAUNCH_AHEAD, 64, 0.5)) {
            for (int i = 0; i < 5; i++) {
                String name = "hog-" + i;
                loop.submit("key:hog", 100, (startsIn, length) -> { })
                        .subscribe(null, null, () -> doneAtMs.put(name, clock.now(TimeUnit.MILLISECONDS)));
            }
            clock.advanceTimeBy(Duration.ofMillis(10));
            loop.submit("key:legit", 10, (startsIn, length) -> { })
                    .subscribe(null, null, () -> doneAtMs.put("legit", clock.now(TimeUnit.MILLISECONDS)));

            clock.advanceTimeBy(Duration.ofSeconds(2));

            // the hog's first prompt fills the first step alone (nobody else was waiting); in the next, formed 5 ms
            // before the first ends, the hog fills at most its half and the legit prompt is taken whole: 60 tokens
            assertThat(steps.subList(0, 2)).containsExactly(Duration.ofMillis(100), Duration.ofMillis(60));
            assertThat(doneAtMs.get("legit")).as("the legit prompt, queued behind 400 of the hog's tokens")
                    .isEqualTo(160L);
            assertThat(doneAtMs.get("hog-4")).isGreaterThan(doneAtMs.get("legit"));
            assertThat(doneAtMs).hasSize(6);
        }
    }

    @Test
    void oneClientMayQueueOnlyItsShareOfThePromptsWhileAnotherStillGetsIn() {
        VirtualTimeScheduler clock = VirtualTimeScheduler.create();
        ServingModel model = new ServingModel("test", 1000, 100, 2, Duration.ofMillis(1), 16, 8);
        try (PrefillLoop loop = new PrefillLoop(model, length -> { }, clock, PrefillLoop.DEFAULT_LAUNCH_AHEAD, 4, 0.5)) {
            // prompts of two steps each: the first is still waiting for its last step when the others come
            loop.submit("key:hog", 200, (startsIn, length) -> { }).subscribe();
            loop.submit("key:hog", 200, (startsIn, length) -> { }).subscribe();

            assertThatThrownBy(() -> loop.submit("key:hog", 200, (startsIn, length) -> { }))
                    .isInstanceOf(PrefillLoop.ClientOverShareException.class)
                    .hasMessageContaining("2 prompts waiting").hasMessageContaining("--client-share");
            loop.submit("key:legit", 200, (startsIn, length) -> { }).subscribe();
            assertThat(loop.waiting()).isEqualTo(3);
        }
    }
}
