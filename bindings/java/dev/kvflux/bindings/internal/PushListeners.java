package dev.kvflux.bindings.internal;

import dev.kvflux.bindings.StatusCode;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.Objects;
import java.util.function.Consumer;

/**
 * The listeners of a status that pushes completion ({@code PushedStatus.onPushed}), kept in one volatile
 * {@code Consumer<StatusCode>} field of the status: the first as it is, each later one chained after those before
 * ({@link Consumer#andThen}). So every wait over a status is told, when several wait for it at once (decode's READ
 * barriers wait for a layer's reads while the transfer's timeout waits for them all), and a status with one
 * listener allocates nothing for it.
 */
public final class PushListeners {
    private PushListeners() {
    }

    /**
     * The handle of the listener field {@code name} of {@code owner}, found through {@code lookup} (the owner's).
     *
     * @throws ExceptionInInitializerError if there is no such field: called from a static initializer
     */
    public static VarHandle field(MethodHandles.Lookup lookup, Class<?> owner, String name) {
        try {
            return lookup.findVarHandle(owner, name, Consumer.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    /** Adds {@code listener} to the chain in {@code status}'s field {@code field}, atomically: none is lost. */
    @SuppressWarnings("unchecked")
    public static void add(VarHandle field, Object status, Consumer<StatusCode> listener) {
        Objects.requireNonNull(listener, "listener");
        Consumer<StatusCode> before;
        do {
            before = (Consumer<StatusCode>) field.getVolatile(status);
        } while (!field.compareAndSet(status, before, before == null ? listener : before.andThen(listener)));
    }
}
