package dev.kvflux.bindings.mori;

/** Where registered memory lives, with MoRI's {@code MemoryLocationType} numbers. */
public enum MemoryLocation {
    CPU(1),
    GPU(2);

    private final int value;

    MemoryLocation(int value) {
        this.value = value;
    }

    public int value() {
        return value;
    }

    /**
     * The location with MoRI's number {@code value}.
     *
     * @throws IllegalArgumentException for a number MoRI does not define (0 is MoRI's Unknown)
     */
    public static MemoryLocation of(int value) {
        for (MemoryLocation location : values()) {
            if (location.value == value) {
                return location;
            }
        }
        throw new IllegalArgumentException("unknown memory location " + value + ": expected 1 (CPU) or 2 (GPU)");
    }
}
