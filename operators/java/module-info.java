/**
 * Reactor operators over transfer statuses: the completion waits ({@code CompletionWait},
 * {@code PushWait}), the native reference waits, and the layer-event polls.
 */
@SuppressWarnings({"requires-automatic", "requires-transitive-automatic"}) // reactor-core and reactive-streams are automatic modules
module dev.kvflux.operators {
    requires transitive dev.kvflux.bindings;
    requires transitive reactor.core;
    requires transitive org.reactivestreams;

    exports dev.kvflux.operators;
}
