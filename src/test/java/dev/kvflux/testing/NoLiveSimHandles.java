package dev.kvflux.testing;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.bindings.mori.MoriIo;
import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

/** After each test: the simulator holds no live handle, so the test released every status and descriptor. */
public final class NoLiveSimHandles implements AfterEachCallback {
    @Override
    public void afterEach(ExtensionContext context) {
        int live = MoriIo.simulator().simulatorControls().orElseThrow().liveHandles();
        assertThat(live).as("simulator handles still live after %s", context.getDisplayName()).isZero();
    }
}
