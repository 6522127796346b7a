package dev.kvflux.bindings;

/** What a non-blocking query of a GPU event says. A failed event is reported by an exception. */
public enum EventState {
    READY,
    NOT_READY
}
