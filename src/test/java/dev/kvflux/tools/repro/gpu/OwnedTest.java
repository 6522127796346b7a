package dev.kvflux.tools.repro.gpu;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** What a GPU target or pair created is closed newest first, every one of it, once. */
class OwnedTest {
    private final List<String> closed = new ArrayList<>();

    private AutoCloseable resource(String name) {
        return () -> closed.add(name);
    }

    @Test
    void resourcesCloseNewestFirstAndOnlyOnce() {
        Owned owned = new Owned();
        AutoCloseable stream = owned.add(resource("stream"));
        owned.add(resource("event"));

        owned.closeAll();
        owned.closeAll();

        assertThat(stream).isNotNull();
        assertThat(closed).containsExactly("event", "stream");
    }

    @Test
    void oneThatFailsToCloseDoesNotKeepTheOthersOpen() {
        Owned owned = new Owned();
        owned.add(resource("buffer"));
        owned.add(() -> {
            throw new IllegalStateException("device lost");
        });
        owned.add(resource("event"));

        owned.closeAll();

        assertThat(closed).containsExactly("event", "buffer");
    }
}
