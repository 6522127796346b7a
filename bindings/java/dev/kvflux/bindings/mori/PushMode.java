package dev.kvflux.bindings.mori;

/**
 * What a {@link MoriEngine} does with the batches it posts ({@link MoriEngine#push(PushMode)}); a batch keeps the
 * mode it was posted with.
 */
public enum PushMode {
    /** MoRI's own model: a status completes when it is queried after its copies end. */
    OFF(0),
    /**
     * The library also records when each batch's copies end ({@link MoriStatus#completedAtNanos()}), and completes
     * nothing: the statuses are still completed by queries, so the polled and native waits behave as with
     * {@link #OFF}, and a benchmark can tell how late each noticed the copies' end.
     */
    TIMES(1),
    /**
     * Push completion: the library completes each status as soon as its copies end and announces it, so its
     * statuses are {@link PushedMoriStatus}es and {@code PushWait} needs no poll. Over the real MoRI this needs
     * kvflux's patch to the xGMI backend (a host function behind each batch's event), which
     * {@code bindings/native/mori/build.sh} applies.
     */
    ON(2);

    private final int value;

    PushMode(int value) {
        this.value = value;
    }

    /** The ABI's {@code KVFLUX_MORI_PUSH_*} number. */
    int value() {
        return value;
    }
}
