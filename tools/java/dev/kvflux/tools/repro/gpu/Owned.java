package dev.kvflux.tools.repro.gpu;

import java.util.ArrayList;
import java.util.List;

/**
 * The GPU resources a reproducer target or pair created, to be closed newest first. Used on the thread
 * that sets its owner up and closes it.
 */
final class Owned {
    private final List<AutoCloseable> resources = new ArrayList<>();

    /** Keeps {@code resource} to close with the others; returns it. */
    <T extends AutoCloseable> T add(T resource) {
        resources.add(resource);
        return resource;
    }

    /**
     * Closes every resource kept, newest first, and forgets them. Best effort: one that throws does not
     * stop the others; what is left is released at the process's exit.
     */
    void closeAll() {
        for (int i = resources.size() - 1; i >= 0; i--) {
            try {
                resources.get(i).close();
            } catch (Exception ignored) {
                // Best effort, as said above.
            }
        }
        resources.clear();
    }
}
