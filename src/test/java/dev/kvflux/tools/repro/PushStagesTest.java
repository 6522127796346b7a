package dev.kvflux.tools.repro;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import dev.kvflux.bindings.PushTimeline;
import dev.kvflux.bindings.PushedStatus;
import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.TransferStatus;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;

/** A push wait's lag, stage by stage, as {@code kvflux repro} reports it. */
class PushStagesTest {
    private static final long U = TransferStatus.UNKNOWN_TIME;
    private static final long MS = 1_000_000;

    private record Settled(PushTimeline timeline) implements PushedStatus {
        @Override
        public Mono<StatusCode> pushed() {
            return Mono.just(StatusCode.SUCCESS);
        }

        @Override
        public StatusCode code() {
            return StatusCode.SUCCESS;
        }

        @Override
        public String message() {
            return "";
        }
    }

    @Test
    void theWaitEndsOnThePushOfTheStatusThatSettledLast() {
        PushTimeline early = new PushTimeline(1 * MS, U, U, U, U, 2 * MS);
        PushTimeline late = new PushTimeline(5 * MS, U, U, U, U, 9 * MS);

        assertThat(PushStages.last(List.of(new Settled(early), new Settled(late), new Settled(PushTimeline.NONE))))
                .isEqualTo(late);
        assertThat(PushStages.last(List.of(new Settled(PushTimeline.NONE)))).as("no push settled any").isNull();
    }

    @Test
    void eachStageIsTimedFromTheLastKnownStageBeforeIt() {
        // a CUDA engine's push: no queue inside the backend, so "settled" counts from the dispatch thread taking it
        PushTimeline cuda = new PushTimeline(10 * MS, 12 * MS, U, U, U, 15 * MS);

        Map<String, Double> stages = PushStages.of(cuda, 9 * MS, 8 * MS, 16 * MS, 20 * MS);

        assertThat(stages.keySet()).containsExactly("callback_ran", "notifier_woke", "settled", "wait_ended",
                "caller_woke");
        assertThat(stages.get("callback_ran")).isCloseTo(1.0, within(1e-9));
        assertThat(stages.get("settled")).isCloseTo(3.0, within(1e-9));
        assertThat(stages.get("caller_woke")).isCloseTo(4.0, within(1e-9));
        assertThat(stages.values().stream().mapToDouble(Double::doubleValue).sum())
                .as("the stages add up to the lag from the GPU's copy end to the caller").isCloseTo(11.0, within(1e-9));
    }

    @Test
    void withoutTheGpusCopyEndTheFirstStageIsTheCallbacksRunAndNothingIsTimedBeforeIt() {
        PushTimeline mori = new PushTimeline(10 * MS, 11 * MS, 12 * MS, 13 * MS, 14 * MS, 15 * MS);

        Map<String, Double> stages = PushStages.of(mori, U, 9 * MS, 16 * MS, 17 * MS);

        assertThat(stages.keySet()).containsExactly("notifier_woke", "queued", "taken", "returned", "settled",
                "wait_ended", "caller_woke");
        assertThat(stages.values()).allSatisfy(ms -> assertThat(ms).isCloseTo(1.0, within(1e-9)));
        assertThat(PushStages.of(null, U, 9 * MS, 16 * MS, 17 * MS)).as("a wait no push ended").isEmpty();
    }

    @Test
    void aPushThatSettledBeforeTheWaitBeganIsFollowedByTheWaitsStart() {
        PushTimeline early = new PushTimeline(10 * MS, 11 * MS, 12 * MS, 13 * MS, 14 * MS, 15 * MS);

        Map<String, Double> stages = PushStages.of(early, U, 18 * MS, 19 * MS, 20 * MS);

        assertThat(stages.keySet()).containsExactly("notifier_woke", "queued", "taken", "returned", "settled",
                "wait_began", "wait_ended", "caller_woke");
        assertThat(stages.get("wait_began")).as("the copies ended while nobody waited yet").isCloseTo(3.0,
                within(1e-9));
        assertThat(stages.get("wait_ended")).as("from the wait's start").isCloseTo(1.0, within(1e-9));
    }

    @Test
    void aWaitThatEndedAtSubscriptionIsTimedFromTheLaterOfTheCopiesEndAndItsStart() {
        Map<String, Double> late = PushStages.atSubscription(9 * MS, 8 * MS, 8 * MS + MS / 2, 12 * MS, 13 * MS);

        assertThat(late.keySet()).as("the copies ended after the wait was subscribed to").containsExactly(
                "ended_at_subscription", "caller_woke");
        assertThat(late.get("ended_at_subscription")).isCloseTo(3.0, within(1e-9));
        assertThat(late.get("caller_woke")).isCloseTo(1.0, within(1e-9));

        Map<String, Double> early = PushStages.atSubscription(5 * MS, 8 * MS, 10 * MS, 12 * MS, 13 * MS);

        assertThat(early.keySet()).containsExactly("wait_began", "subscribed", "ended_at_subscription",
                "caller_woke");
        assertThat(early.get("wait_began")).as("the copies ended while nobody waited yet").isCloseTo(3.0,
                within(1e-9));
        assertThat(early.get("subscribed")).isCloseTo(2.0, within(1e-9));
        assertThat(early.values().stream().mapToDouble(Double::doubleValue).sum())
                .as("the stages add up to the lag from the GPU's copy end to the caller").isCloseTo(8.0, within(1e-9));
    }

    @Test
    void theReportGivesEachStagesP50P99AndMaxInTheOrderOfThePushsWay() {
        List<ReproRun.Wait> waits = new java.util.ArrayList<>();
        for (int i = 1; i <= 100; i++) {
            waits.add(new ReproRun.Wait(0.1, 1, 1, null, Map.of(), 2.0,
                    Map.of("settled", i / 100.0, "notifier_woke", 0.5)));
        }
        ReproRun.Result result = new ReproRun.Result("test", ReproGeometry.VLLM_MORI_IO, ReproSettings.defaults(),
                List.of(new ReproRun.StrategyResult("reactive-push", waits)), Map.of());

        assertThat(ReproReport.json(result)).contains("\"stages\":{\"notifier_woke\":{\"p50_ms\":0.5,\"p99_ms\":0.5,"
                + "\"max_ms\":0.5,\"waits\":100},\"settled\":{\"p50_ms\":0.505,\"p99_ms\":0.99,\"max_ms\":1,"
                + "\"waits\":100}}");
        assertThat(ReproReport.table(result)).containsPattern("stage settled, p50 / p99 / max \\(ms\\) +0\\.505 / 0\\.990"
                + " / 1\\.000");
    }
}
