package dev.kvflux.bindings.mori;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

/** After each test: the simulator holds no live handle, so the test released every status and descriptor. */
final class NoLiveHandles implements AfterEachCallback {
    @Override
    public void afterEach(ExtensionContext context) {
        int live = MoriIo.simulator().simulatorControls().orElseThrow().liveHandles();
        assertThat(live).as("simulator handles still live after %s", context.getDisplayName()).isZero();
    }
}
