package dev.kvflux.serving.role;

import reactor.core.scheduler.Schedulers;

/** The guard of the roles' blocking start-up methods. */
final class Blocking {
    private Blocking() {
    }

    /**
     * Throws unless the calling thread may block. Checked before anything is bound, so a start called from
     * the wrong thread leaves no port open behind it.
     *
     * @throws IllegalStateException naming {@code what} and the thread, if it is a Reactor non-blocking thread
     */
    static void requireBlockingAllowed(String what) {
        if (Schedulers.isInNonBlockingThread()) {
            throw new IllegalStateException(what + " blocks until its ports are bound, so it cannot run on the"
                    + " non-blocking thread " + Thread.currentThread().getName() + "; call it from main or another"
                    + " plain thread, or from a reactive chain with subscribeOn(Schedulers.boundedElastic())");
        }
    }
}
