package dev.kvflux.bindings.mori;

/**
 * A call into kvflux's MoRI IO C ABI ({@code kvflux_mori.h}) failed, or its library could not be loaded.
 * The message names the C function, the ABI's own error ({@code KVFLUX_MORI_E_BAD_HANDLE}, ...) and the
 * library's explanation of what was wrong.
 */
public final class MoriIoException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /** The code used when the library itself is missing or unusable (not an ABI return code). */
    public static final int LIBRARY_UNAVAILABLE = Integer.MIN_VALUE;

    private final int code;
    private final String errorName;

    public MoriIoException(int code, String errorName, String message) {
        super(message);
        this.code = code;
        this.errorName = errorName;
    }

    public MoriIoException(int code, String errorName, String message, Throwable cause) {
        super(message, cause);
        this.code = code;
        this.errorName = errorName;
    }

    /** The ABI's negative return code, or {@link #LIBRARY_UNAVAILABLE}. */
    public int code() {
        return code;
    }

    /** The ABI's name for the code, such as {@code KVFLUX_MORI_E_INVALID_ARG}. */
    public String errorName() {
        return errorName;
    }
}
