package dev.kvflux.tools.bench;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import org.junit.jupiter.api.Test;

class ServeBenchWarmupTest {
    @Test
    void theWarmUpRunsAtTheRunsLargestConcurrencyNeverAllItsRequestsAtOnce() {
        assertThat(ServeBench.warmupConcurrency(1000, List.of(1))).isEqualTo(1);
        assertThat(ServeBench.warmupConcurrency(1000, List.of(8, 64, 16))).isEqualTo(64);
    }

    @Test
    void aWarmUpSmallerThanTheConcurrencySendsAllItsRequestsAtOnce() {
        assertThat(ServeBench.warmupConcurrency(8, List.of(8, 16))).isEqualTo(8);
        assertThat(ServeBench.warmupConcurrency(3, List.of(64))).isEqualTo(3);
    }
}
