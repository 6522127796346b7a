package dev.kvflux.tools;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.assertj.core.data.Offset;
import org.junit.jupiter.api.Test;

class StatsTest {

    @Test
    void theMedianIsTheMiddleValueOrTheMeanOfTheTwoMiddleOnes() {
        assertThat(Stats.median(3, 1, 2)).isEqualTo(2);
        assertThat(Stats.median(4, 1, 3, 2)).isEqualTo(2.5);
        assertThat(Stats.median()).isNaN();
    }

    @Test
    void theExtremesOfNoValuesAreNaN() {
        assertThat(Stats.min(3, 1, 2)).isEqualTo(1);
        assertThat(Stats.max(3, 1, 2)).isEqualTo(3);
        assertThat(Stats.min()).isNaN();
        assertThat(Stats.max()).isNaN();
    }

    @Test
    void aNearestRankPercentileIsAlwaysOneOfTheValues() {
        double[] sorted = {1, 2, 3, 4};
        assertThat(Stats.nearestRank(sorted, 0.5)).isEqualTo(2);
        assertThat(Stats.nearestRank(sorted, 0.99)).isEqualTo(4);
        assertThat(Stats.nearestRank(sorted, 0)).isEqualTo(1);
        assertThat(Stats.nearestRank(new double[0], 0.5)).isNaN();
    }

    @Test
    void anInterpolatedPercentileLiesBetweenTheTwoClosestRanks() {
        double[] sorted = {1, 2, 3, 4};
        assertThat(Stats.interpolated(sorted, 0.5)).isEqualTo(2.5);
        assertThat(Stats.interpolated(sorted, 0.9)).isEqualTo(3.7, Offset.offset(1e-9));
        assertThat(Stats.interpolated(sorted, 1)).isEqualTo(4);
        assertThat(Stats.interpolated(new double[0], 0.5)).isNaN();
    }

    @Test
    void noneChangesItsArgument() {
        double[] values = {3, 1, 2};
        Stats.median(values);
        assertThat(Stats.sorted(values)).containsExactly(1, 2, 3);
        assertThat(values).containsExactly(3, 1, 2);
    }

    @Test
    void aPercentileOutsideZeroToOneIsRefused() {
        assertThatThrownBy(() -> Stats.nearestRank(new double[] {1}, 99))
                .hasMessage("a percentile is a fraction from 0 to 1, got 99.0");
    }
}
