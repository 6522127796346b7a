package dev.kvflux.bindings;

/**
 * A transfer status code, with MoRI IO's numbering.
 *
 * <p>Codes above {@link #ERR_BEGIN_MARKER} are failures; {@link #INIT} and {@link #IN_PROGRESS} are
 * not terminal.
 */
public enum StatusCode {
    SUCCESS(0),
    INIT(1),
    IN_PROGRESS(2),
    ERR_INVALID_ARGS(11),
    ERR_NOT_FOUND(12),
    ERR_RDMA_OP(13),
    ERR_BAD_STATE(14),
    ERR_GPU_OP(15);

    /** The value failure codes are greater than (MoRI's {@code ERR_BEGIN}). */
    public static final int ERR_BEGIN_MARKER = 10;

    private final int value;

    StatusCode(int value) {
        this.value = value;
    }

    /** The code's numeric value, as MoRI IO and kvflux's C ABI use it. */
    public int value() {
        return value;
    }

    /** Whether this code is a failure (its value is greater than {@value #ERR_BEGIN_MARKER}). */
    public boolean isFailure() {
        return value > ERR_BEGIN_MARKER;
    }

    /** Whether this code is final: success or a failure. */
    public boolean isTerminal() {
        return this == SUCCESS || isFailure();
    }

    /**
     * The code with the given numeric value.
     *
     * @throws IllegalArgumentException if no code has that value
     */
    public static StatusCode of(int value) {
        for (StatusCode code : values()) {
            if (code.value == value) {
                return code;
            }
        }
        throw new IllegalArgumentException("unknown transfer status code " + value
                + ": expected one of 0 (SUCCESS), 1 (INIT), 2 (IN_PROGRESS) or 11..15 (ERR_INVALID_ARGS.."
                + "ERR_GPU_OP); is the native library newer than this kvflux?");
    }

    /** The name in MoRI's Python form, {@code StatusCode.IN_PROGRESS}, as vLLM's wait errors print it. */
    public String qualifiedName() {
        return "StatusCode." + name();
    }
}
