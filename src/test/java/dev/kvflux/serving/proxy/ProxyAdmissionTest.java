package dev.kvflux.serving.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;
import reactor.core.Disposable;

/** The proxy's limit on requests in flight: places up to the limit, a first-come queue behind it, bounded. */
class ProxyAdmissionTest {
    private static final Duration WAIT = Duration.ofSeconds(10);

    @Test
    void placesUpToTheLimitComeAtOnceAndTheNextWaitsUntilOneIsGivenBack() {
        ProxyAdmission admission = new ProxyAdmission(2, 10);
        ProxyAdmission.Place first = admission.admit().block(WAIT);
        ProxyAdmission.Place second = admission.admit().block(WAIT);
        CompletableFuture<ProxyAdmission.Place> third = admission.admit().toFuture();

        assertThat(third).isNotDone();
        assertThat(admission.queued()).isEqualTo(1);

        first.close();

        assertThat(third).succeedsWithin(WAIT);
        assertThat(admission.inFlight()).as("the place passed on, not freed").isEqualTo(2);
        assertThat(admission.queued()).isZero();
        second.close();
        third.join().close();
        assertThat(admission.inFlight()).isZero();
    }

    @Test
    void waitersArePlacedInTheOrderTheyCame() {
        ProxyAdmission admission = new ProxyAdmission(1, 10);
        ProxyAdmission.Place held = admission.admit().block(WAIT);
        List<CompletableFuture<ProxyAdmission.Place>> waiting = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            waiting.add(admission.admit().toFuture());
        }

        held.close();
        assertThat(waiting.get(0)).succeedsWithin(WAIT);
        assertThat(waiting.get(1)).isNotDone();
        waiting.get(0).join().close();
        assertThat(waiting.get(1)).succeedsWithin(WAIT);
        assertThat(waiting.get(2)).isNotDone();
    }

    @Test
    void oneMoreThanMaxQueuedIsRefusedSayingWhatIsFull() {
        ProxyAdmission admission = new ProxyAdmission(1, 2);
        admission.admit().block(WAIT);
        admission.admit().toFuture();
        admission.admit().toFuture();

        CompletableFuture<ProxyAdmission.Place> refused = admission.admit().toFuture();

        assertThat(refused).failsWithin(WAIT).withThrowableThat().havingRootCause()
                .isInstanceOf(ProxyAdmission.QueueFullException.class)
                .withMessageContaining("1 requests in flight (its --max-in-flight) and 2 waiting (its --max-queued)");
        assertThat(admission.queued()).isEqualTo(2);
    }

    @Test
    void aWaiterThatGoesAwayLeavesTheQueueAndThePlaceGoesToTheNext() {
        ProxyAdmission admission = new ProxyAdmission(1, 10);
        ProxyAdmission.Place held = admission.admit().block(WAIT);
        Disposable gone = admission.admit().subscribe();
        CompletableFuture<ProxyAdmission.Place> next = admission.admit().toFuture();

        gone.dispose();
        assertThat(admission.queued()).isEqualTo(1);
        held.close();

        assertThat(next).succeedsWithin(WAIT);
        next.join().close();
        assertThat(admission.inFlight()).as("the request that went away holds nothing").isZero();
    }

    @Test
    void aPlaceGivenBackTwiceFreesOnePlace() {
        ProxyAdmission admission = new ProxyAdmission(2, 10);
        ProxyAdmission.Place place = admission.admit().block(WAIT);
        admission.admit().block(WAIT);

        place.close();
        place.close();

        assertThat(admission.inFlight()).isEqualTo(1);
    }

    @Test
    void withoutALimitNothingWaits() {
        ProxyAdmission admission = new ProxyAdmission(0, 0);
        for (int i = 0; i < 1000; i++) {
            assertThat(admission.admit().block(WAIT)).isNotNull();
        }
        assertThat(admission.limits()).isFalse();
        assertThat(admission.queued()).isZero();
    }
}
