package dev.kvflux.serving.proxy;

import java.util.Locale;

/** Which instance gives a streamed completion its first token ({@code kvflux proxy --first-token}). */
public enum FirstToken {
    /** Decode's stream, whole, as vLLM's proxy passes it on: the client's first token comes after the KV moved. */
    DECODE,
    /**
     * Prefill's answer, passed on as the stream's first event as soon as prefill answers; decode's stream follows
     * without its own first event. The client's time to first token becomes prefill's. Streamed requests of at least
     * 2 tokens only; the others as {@link #DECODE}.
     */
    PREFILL;

    /** The name on the command line: {@code decode}, {@code prefill}. */
    public String wireName() {
        return name().toLowerCase(Locale.ROOT);
    }

    /**
     * The mode named {@code name} ({@code decode} or {@code prefill}, any case).
     *
     * @throws IllegalArgumentException naming both when it is neither
     */
    public static FirstToken named(String name) {
        for (FirstToken mode : values()) {
            if (mode.wireName().equalsIgnoreCase(name == null ? "" : name.trim())) {
                return mode;
            }
        }
        throw new IllegalArgumentException("unknown first-token source '" + name + "'; choose decode (its stream, whole)"
                + " or prefill (prefill's token at once, then decode's stream)");
    }
}
