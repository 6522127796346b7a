package dev.kvflux.transfer;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvflux.bindings.BatchPlan;
import java.util.List;
import org.junit.jupiter.api.Test;

/** MoRIIO's row layout: which bytes one layer's copies move. */
class KvLayoutTest {

    @Test
    void aLayersPlanCopiesEachLocalBlockIntoTheDecodeBlockAtTheSamePosition() {
        KvLayout layout = KvLayout.rows(4, 100, 64);
        BatchPlan plan = layout.layerPlan(2, List.of(7L, 8L, 9L), List.of(50L, 51L));

        assertThat(layout.regionBytes()).isEqualTo(4L * 100 * 64);
        assertThat(plan.blocks()).as("as many copies as the shorter list").isEqualTo(2);
        assertThat(plan.localOffset(0)).isEqualTo((2 * 100 + 7) * 64L);
        assertThat(plan.remoteOffset(1)).isEqualTo((2 * 100 + 51) * 64L);
        assertThat(plan.size(0)).isEqualTo(64);
    }

    @Test
    void aLayerOrBlockOutsideTheLayoutIsRefused() {
        KvLayout layout = KvLayout.rows(4, 100, 64);
        assertThatThrownBy(() -> layout.layerPlan(4, List.of(1L), List.of(1L)))
                .isInstanceOf(IndexOutOfBoundsException.class);
        assertThatThrownBy(() -> layout.layerPlan(0, List.of(100L), List.of(1L)))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("outside the layout's rows");
        assertThatThrownBy(() -> KvLayout.rows(0, 100, 64)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("at least one layer");
    }
}
