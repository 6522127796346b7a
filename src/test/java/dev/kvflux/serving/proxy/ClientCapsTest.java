package dev.kvflux.serving.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/**
 * A client refused as over its share is capped at what the roles let in of it; others are not, the cap rises as its
 * requests end well, and it is forgotten once the client has nothing in flight.
 */
class ClientCapsTest {
    private final ClientCaps caps = new ClientCaps();

    private void start(String client, int n) {
        for (int i = 0; i < n; i++) {
            assertThat(caps.tryStart(client)).isEqualTo(-1);
        }
    }

    @Test
    void aClientNeverRefusedIsNeverCapped() {
        start("hog", 500);
        assertThat(caps.tryStart("hog")).isEqualTo(-1);
    }

    @Test
    void aRefusalCapsTheClientAtWhatItHasInFlightAndOnlyThatClient() {
        start("hog", 10);
        caps.ended("hog", true);

        // nine are still in flight, the roles' share of this client
        assertThat(caps.tryStart("hog")).isEqualTo(9);
        assertThat(caps.tryStart("other")).isEqualTo(-1);
    }

    @Test
    void eachRequestThatEndsWellLetsTheClientBackUpByOne() {
        start("hog", 10);
        caps.ended("hog", true);
        caps.ended("hog", false);

        // eight in flight, cap ten: two more get in, the third is refused
        assertThat(caps.tryStart("hog")).isEqualTo(-1);
        assertThat(caps.tryStart("hog")).isEqualTo(-1);
        assertThat(caps.tryStart("hog")).isEqualTo(10);
    }

    @Test
    void theCapIsForgottenWhenNothingOfTheClientIsInFlight() {
        start("hog", 2);
        caps.ended("hog", true);
        caps.ended("hog", true);
        assertThat(caps.clients()).isZero();

        start("hog", 50);
        assertThat(caps.clients()).isEqualTo(1);
    }
}
