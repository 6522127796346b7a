package dev.kvflux.serving.observe;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.serving.metrics.RoleMetrics;
import io.micrometer.core.instrument.Timer;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** One role's handover marks: each timed from the role's mark before it, in order, and told to the listener. */
class HandoverTest {
    private final SimpleMeterRegistry registry = new SimpleMeterRegistry();
    private final List<String> heard = new CopyOnWriteArrayList<>();
    private final Handover handover = Handover.of(RoleMetrics.of(registry, "prefill"),
            (id, stage, at) -> heard.add(id + " " + stage.label() + " " + at));

    private Timer stage(Handover.Stage stage) {
        return registry.find(Handover.METER).tags("role", "prefill", "stage", stage.label()).timer();
    }

    @Test
    void eachMarkIsTimedFromTheRolesMarkBeforeItAndTheFirstIsNotTimed() {
        Handover.Marks marks = handover.begin("t-1");
        marks.reached(Handover.Stage.PREFILL_ADMITTED, 1_000);
        marks.reached(Handover.Stage.LAST_LAYER_READY, 4_000);
        marks.reached(Handover.Stage.LAST_COPY_ENDED, 9_000);
        marks.reached(Handover.Stage.WAIT_ENDED, 9_500);

        assertThat(stage(Handover.Stage.PREFILL_ADMITTED)).as("nothing before it on this role").isNull();
        assertThat(stage(Handover.Stage.LAST_LAYER_READY).totalTime(TimeUnit.NANOSECONDS)).isEqualTo(3_000);
        assertThat(stage(Handover.Stage.LAST_COPY_ENDED).totalTime(TimeUnit.NANOSECONDS)).isEqualTo(5_000);
        assertThat(stage(Handover.Stage.WAIT_ENDED).totalTime(TimeUnit.NANOSECONDS)).isEqualTo(500);
        assertThat(heard).containsExactly("t-1 prefill_admitted 1000", "t-1 last_layer_ready 4000",
                "t-1 last_copy_ended 9000", "t-1 wait_ended 9500");
    }

    @Test
    void aStageMarkedAgainOrAfterALaterOneIsIgnored() {
        Handover.Marks marks = handover.begin("t-2");
        marks.reached(Handover.Stage.WRITE_DONE_RECEIVED, 100);
        marks.reached(Handover.Stage.DECODE_ADMITTED, 300);
        marks.reached(Handover.Stage.DECODE_ADMITTED, 900);          // a second rank's notice, say
        marks.reached(Handover.Stage.WRITE_DONE_RECEIVED, 1_000);
        marks.reached(Handover.Stage.FIRST_TOKEN_OUT, 1_300);

        assertThat(stage(Handover.Stage.DECODE_ADMITTED).count()).isEqualTo(1);
        assertThat(stage(Handover.Stage.FIRST_TOKEN_OUT).totalTime(TimeUnit.NANOSECONDS)).as("from the first admission")
                .isEqualTo(1_000);
        assertThat(heard).hasSize(3);
    }

    @Test
    void aMarkStampedBeforeTheRolesPreviousOneCountsAsNoTime() {
        Handover.Marks marks = handover.begin("t-3");
        marks.reached(Handover.Stage.LAST_LAYER_READY, 5_000);
        marks.reached(Handover.Stage.LAST_COPY_ENDED, 4_000);   // the engine's copy end, before the post returned

        assertThat(stage(Handover.Stage.LAST_COPY_ENDED).totalTime(TimeUnit.NANOSECONDS)).isZero();
        assertThat(stage(Handover.Stage.LAST_COPY_ENDED).count()).isEqualTo(1);
    }

    @Test
    void noneRecordsNothingAndTellsNoOne() {
        Handover.NONE.begin("t-4").reached(Handover.Stage.PROXY_IN);
        Handover.NONE.begin("t-4").reached(Handover.Stage.CLIENT_FIRST_BYTE);
        assertThat(registry.find(Handover.METER).timers()).isEmpty();
        assertThat(heard).isEmpty();
    }
}
