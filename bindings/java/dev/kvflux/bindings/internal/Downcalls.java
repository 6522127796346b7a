package dev.kvflux.bindings.internal;

/**
 * The one place where a downcall's {@code invokeExact}, which declares {@code Throwable}, becomes a call
 * that throws unchecked exceptions only: runtime exceptions and errors pass through as they are, anything
 * else becomes an {@link IllegalStateException} with it as the cause. The GPU runtime and driver calls and
 * the MoRI shim's calls all go through it.
 *
 * <p>A call site passes its {@code invokeExact} as a lambda, {@code call(() -> (int) h.invokeExact(x))}.
 * Once the JIT has compiled the caller, the lambda is inlined and not allocated, so hot calls such as
 * event queries allocate nothing per call.
 */
public final class Downcalls {

    /** A downcall returning the runtime's {@code int} error code. */
    @FunctionalInterface
    public interface IntCall {
        int invoke() throws Throwable;
    }

    /** A downcall returning anything else (a pointer). */
    @FunctionalInterface
    public interface Call<T> {
        T invoke() throws Throwable;
    }

    private Downcalls() {
    }

    /** Runs {@code call} and returns its code. */
    public static int call(IntCall call) {
        try {
            return call.invoke();
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** Runs {@code call} and returns its result. */
    public static <T> T call(Call<T> call) {
        try {
            return call.invoke();
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** A downcall's throwable as an unchecked exception (errors are rethrown as they are). */
    public static RuntimeException rethrow(Throwable t) {
        if (t instanceof RuntimeException e) {
            return e;
        }
        if (t instanceof Error e) {
            throw e;
        }
        return new IllegalStateException("native call failed unexpectedly", t);
    }
}
