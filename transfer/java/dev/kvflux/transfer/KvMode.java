package dev.kvflux.transfer;

/**
 * Who moves a transfer's KV, as vLLM's MoRIIO connector has the two modes: in {@link #WRITE} prefill writes each
 * layer into decode's blocks and says {@code write_done}; in {@link #READ} prefill keeps the KV in its own blocks and
 * says {@code read_ready}, and decode reads each layer, waiting for that layer's reads (a drain barrier) before the
 * layer's step, then says {@code release}. Both sides of a transfer must run the same mode.
 */
public enum KvMode {
    /** Prefill writes into decode (the default). */
    WRITE,
    /** Decode reads from prefill. */
    READ;

    /** The name users give ({@code write}, {@code read}). */
    public String wireName() {
        return name().toLowerCase(java.util.Locale.ROOT);
    }

    /**
     * The mode named {@code name} ({@code write} or {@code read}, any case).
     *
     * @throws IllegalArgumentException saying which names there are
     */
    public static KvMode of(String name) {
        for (KvMode mode : values()) {
            if (mode.wireName().equalsIgnoreCase(name.trim())) {
                return mode;
            }
        }
        throw new IllegalArgumentException("unknown KV mode '" + name + "'; expected write or read");
    }
}
