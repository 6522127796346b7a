package dev.kvflux.pipeline.serve;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import reactor.core.Disposable;
import reactor.core.publisher.Mono;
import reactor.test.scheduler.VirtualTimeScheduler;

/** The registration schedule, on virtual time. */
class InstancePingerTest {

    @Test
    void pingsThatHangKeepBeingRetriedForAsLongAsTheInstanceRuns() {
        VirtualTimeScheduler clock = VirtualTimeScheduler.create();
        AtomicInteger started = new AtomicInteger();
        List<String> problems = new CopyOnWriteArrayList<>();
        List<Throwable> errors = new CopyOnWriteArrayList<>();
        // the proxy's host drops connection attempts: every ping would take 30 s to fail, ten intervals
        Disposable pings = InstancePinger.schedule(Duration.ofSeconds(3), clock, () -> {
            started.incrementAndGet();
            return Mono.delay(Duration.ofSeconds(30), clock).thenReturn("connect timed out");
        }).subscribe(problems::add, errors::add);

        clock.advanceTimeBy(Duration.ofMinutes(10));
        pings.dispose();

        assertThat(errors).as("the schedule never ends on its own").isEmpty();
        assertThat(started.get()).as("one ping per interval, at 0 s to 600 s").isEqualTo(201);
        assertThat(problems).hasSize(200).allSatisfy(p -> assertThat(p).contains("Timeout"));
    }
}
