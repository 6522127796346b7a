/**
 * The prefill-to-decode transfer lifecycle: the notify protocol between the two sides
 * ({@code dev.kvflux.transfer.notify}: messages, codec, framing, signing, limits, server and client) and each side
 * of a transfer ({@link dev.kvflux.transfer.PrefillSide}, {@link dev.kvflux.transfer.DecodeSide}: block lists,
 * {@code write_done} / {@code write_failed}, {@code abort}, {@code release}, fencing, incarnations, block
 * ownership). Logs through slf4j-api only; reports metrics through recorder interfaces (kvflux-micrometer has
 * Micrometer ones).
 */
@SuppressWarnings({"requires-automatic", "requires-transitive-automatic"}) // reactor-netty-core, context-propagation
module dev.kvflux.transfer {
    requires transitive dev.kvflux.pipeline;
    requires transitive reactor.netty.core; // LoopResources, taken by the sides' and the notify channel's builders
    requires io.netty.buffer;
    requires io.netty.codec;
    requires io.netty.common;
    requires io.netty.transport;
    requires org.slf4j;
    requires context.propagation;

    exports dev.kvflux.transfer;
    exports dev.kvflux.transfer.notify;
}
