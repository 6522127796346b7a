package dev.kvflux.micrometer;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatIllegalArgumentException;

import dev.kvflux.bindings.StatusCode;
import dev.kvflux.operators.CompletionWait;
import dev.kvflux.operators.FailMode;
import dev.kvflux.operators.PushWait;
import dev.kvflux.operators.WaitOutcome;
import dev.kvflux.testing.ScriptedStatus;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.Timer;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import reactor.test.StepVerifier;
import reactor.test.scheduler.VirtualTimeScheduler;

/** The meters {@link MicrometerWaitRecorder} keeps, by name, tags and value. */
class MicrometerWaitRecorderTest {
    private final SimpleMeterRegistry registry = new SimpleMeterRegistry();
    private final MicrometerWaitRecorder recorder = MicrometerWaitRecorder.of(registry, Tags.of("role", "prefill"));

    private Timer duration(String strategy, WaitOutcome outcome) {
        return registry.get(MicrometerWaitRecorder.DURATION)
                .tags("strategy", strategy, "outcome", outcome.tagValue(), "role", "prefill").timer();
    }

    private double counter(String name, String strategy) {
        return registry.get(name).tags("strategy", strategy, "role", "prefill").counter().count();
    }

    private double gauge(String name, String strategy) {
        return registry.get(name).tags("strategy", strategy, "role", "prefill").gauge().value();
    }

    @Test
    void eachCallLandsInItsMeterTaggedWithTheStrategyAndTheCommonTags() {
        recorder.recordWaitStarted("reactive", 3);
        recorder.recordStatusesInFlight("reactive", 3);
        recorder.recordStatusesInFlight("reactive", -1);
        recorder.recordStatusFailed("reactive", StatusCode.ERR_RDMA_OP);
        recorder.recordStatusFailed("reactive", StatusCode.ERR_RDMA_OP);
        recorder.recordPolls("reactive", 6, 14);

        assertThat(gauge(MicrometerWaitRecorder.ACTIVE, "reactive")).isEqualTo(1);
        assertThat(gauge(MicrometerWaitRecorder.STATUSES_IN_FLIGHT, "reactive")).isEqualTo(2);
        assertThat(registry.get(MicrometerWaitRecorder.STATUSES_FAILED)
                .tags("strategy", "reactive", "code", "ERR_RDMA_OP", "role", "prefill").counter().count()).isEqualTo(2);
        assertThat(counter(MicrometerWaitRecorder.POLLS, "reactive")).isEqualTo(6);
        assertThat(counter(MicrometerWaitRecorder.QUERIES, "reactive")).isEqualTo(14);

        recorder.recordStatusesInFlight("reactive", -2);
        recorder.recordDetectionLag("reactive", TimeUnit.MILLISECONDS.toNanos(4));
        recorder.recordWaitEnded("reactive", WaitOutcome.DONE, TimeUnit.MILLISECONDS.toNanos(50));

        assertThat(gauge(MicrometerWaitRecorder.ACTIVE, "reactive")).isZero();
        assertThat(gauge(MicrometerWaitRecorder.STATUSES_IN_FLIGHT, "reactive")).isZero();
        assertThat(duration("reactive", WaitOutcome.DONE).count()).isEqualTo(1);
        assertThat(duration("reactive", WaitOutcome.DONE).totalTime(TimeUnit.MILLISECONDS)).isEqualTo(50);
        assertThat(registry.get(MicrometerWaitRecorder.DETECTION_LAG).tags("strategy", "reactive").timer()
                .totalTime(TimeUnit.MILLISECONDS)).isEqualTo(4);
    }

    @Test
    void timeoutsAndStallsAreCountedBesideTheirDurations() {
        recorder.recordWaitEnded("reactive-shared", WaitOutcome.TIMED_OUT, TimeUnit.SECONDS.toNanos(30));
        recorder.recordWaitEnded("reactive-shared", WaitOutcome.STALLED, TimeUnit.SECONDS.toNanos(5));
        recorder.recordWaitEnded("reactive-shared", WaitOutcome.STALLED, TimeUnit.SECONDS.toNanos(5));

        assertThat(counter(MicrometerWaitRecorder.TIMEOUTS, "reactive-shared")).isEqualTo(1);
        assertThat(counter(MicrometerWaitRecorder.STALLS, "reactive-shared")).isEqualTo(2);
        assertThat(duration("reactive-shared", WaitOutcome.STALLED).count()).isEqualTo(2);
        assertThat(duration("reactive-shared", WaitOutcome.DONE).count()).as("registered, never recorded").isZero();
    }

    @Test
    void aStrategysMetersAreRegisteredOnceWhateverTheNumberOfReports() {
        for (int i = 0; i < 1000; i++) {
            recorder.recordWaitStarted("reactive-push", 1);
            recorder.recordWaitEnded("reactive-push", WaitOutcome.DONE, 1);
            recorder.recordWaitStarted("reactive", 1);
            recorder.recordWaitEnded("reactive", WaitOutcome.CANCELLED, 1);
        }
        List<Meter> meters = registry.getMeters();
        assertThat(meters.stream().filter(m -> m.getId().getName().equals(MicrometerWaitRecorder.DURATION)))
                .as("one timer per strategy and outcome").hasSize(2 * WaitOutcome.values().length);
        assertThat(duration("reactive", WaitOutcome.CANCELLED).count()).isEqualTo(1000);
    }

    @Test
    void aCommonTagThatClashesWithTheMetersOwnIsRefused() {
        assertThatIllegalArgumentException().isThrownBy(() -> MicrometerWaitRecorder.of(registry, Tags.of("outcome", "x")))
                .withMessageContaining("outcome");
    }

    @Test
    void withHistogramsTheTimersPublishPercentileBuckets() {
        java.util.Map<String, Boolean> histogram = new java.util.concurrent.ConcurrentHashMap<>();
        SimpleMeterRegistry seen = new SimpleMeterRegistry();
        seen.config().meterFilter(new io.micrometer.core.instrument.config.MeterFilter() {
            @Override
            public io.micrometer.core.instrument.distribution.DistributionStatisticConfig configure(
                    Meter.Id id, io.micrometer.core.instrument.distribution.DistributionStatisticConfig config) {
                histogram.put(id.getName() + " " + id.getTag("strategy"), Boolean.TRUE.equals(config.isPublishingHistogram()));
                return config;
            }
        });
        MicrometerWaitRecorder.of(seen).histograms(true).recordDetectionLag("reactive", 3);
        MicrometerWaitRecorder.of(seen).recordDetectionLag("native", 3);

        assertThat(histogram).containsEntry(MicrometerWaitRecorder.DETECTION_LAG + " reactive", true)
                .containsEntry(MicrometerWaitRecorder.DURATION + " reactive", true)
                .containsEntry(MicrometerWaitRecorder.DETECTION_LAG + " native", false);
    }

    @Test
    void realWaitsFillTheMetersInVirtualTime() {
        StepVerifier.withVirtualTime(() -> CompletionWait.of(FailMode.FAIL_FAST, Duration.ofSeconds(1)).recorder(recorder)
                        .await(List.of(ScriptedStatus.succeedsAt(VirtualTimeScheduler.get(), Duration.ofMillis(35)))))
                .expectSubscription()
                .thenAwait(Duration.ofMillis(40))
                .verifyComplete();
        StepVerifier.withVirtualTime(() -> PushWait.failFast(Duration.ofSeconds(1)).recorder(recorder)
                        .await(List.of(ScriptedStatus.never(VirtualTimeScheduler.get()))))
                .expectSubscription()
                .thenAwait(Duration.ofSeconds(1))
                .expectError()
                .verify(Duration.ofSeconds(5));

        assertThat(duration("reactive", WaitOutcome.DONE).totalTime(TimeUnit.MILLISECONDS)).isEqualTo(40);
        assertThat(registry.get(MicrometerWaitRecorder.DETECTION_LAG).tags("strategy", "reactive").timer()
                .totalTime(TimeUnit.MILLISECONDS)).isEqualTo(5);
        assertThat(counter(MicrometerWaitRecorder.POLLS, "reactive")).isEqualTo(5);
        assertThat(counter(MicrometerWaitRecorder.TIMEOUTS, "reactive-push")).isEqualTo(1);
        assertThat(gauge(MicrometerWaitRecorder.STATUSES_IN_FLIGHT, "reactive-push")).isZero();
        assertThat(gauge(MicrometerWaitRecorder.ACTIVE, "reactive-push")).isZero();
    }
}
