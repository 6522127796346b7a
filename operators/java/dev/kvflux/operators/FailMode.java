package dev.kvflux.operators;

/**
 * How a wait treats a failed status while other statuses of the same request are still in flight. Every
 * wait's {@link WaitSpec} has one; {@link CompletionWait}, {@link PushWait} and {@link SlicedNativeWait} follow
 * it, and {@link NativeWait}'s single native call waits as MoRI's does whichever it is.
 */
public enum FailMode {
    /** Error at once: the WRITE path, where decode should hear of the failure as soon as possible. */
    FAIL_FAST,
    /** Error once nothing is in flight: the READ barrier, where buffers may be reused right after. */
    DRAIN
}
