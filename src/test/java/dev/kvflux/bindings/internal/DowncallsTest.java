package dev.kvflux.bindings.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import org.junit.jupiter.api.Test;

/** The one mapping of what a downcall's {@code invokeExact} throws, shared by the runtime and driver calls. */
class DowncallsTest {

    private static int twice(long x) {
        return (int) x * 2;
    }

    @Test
    void aCallReturnsWhatTheHandleReturns() throws ReflectiveOperationException {
        MethodHandle handle = MethodHandles.lookup().findStatic(DowncallsTest.class, "twice",
                MethodType.methodType(int.class, long.class));
        assertThat(Downcalls.call(() -> (int) handle.invokeExact(21L))).isEqualTo(42);
        assertThat(Downcalls.call(() -> MemorySegment.NULL)).isSameAs(MemorySegment.NULL);
    }

    @Test
    void aRuntimeExceptionPassesThroughAsItIs() {
        IllegalArgumentException thrown = new IllegalArgumentException("closed arena");
        Downcalls.IntCall call = () -> {
            throw thrown;
        };
        assertThatThrownBy(() -> Downcalls.call(call)).isSameAs(thrown);
    }

    @Test
    void anErrorPassesThroughAsItIs() {
        StackOverflowError thrown = new StackOverflowError();
        assertThatThrownBy(() -> Downcalls.call(() -> (Object) throwing(thrown))).isSameAs(thrown);
    }

    @Test
    void aCheckedThrowableBecomesAnIllegalStateExceptionWithItAsTheCause() {
        IOException thrown = new IOException("checked");
        assertThatThrownBy(() -> Downcalls.call(() -> (int) throwing(thrown)))
                .isExactlyInstanceOf(IllegalStateException.class).hasCause(thrown)
                .hasMessage("native call failed unexpectedly");
    }

    private static int throwing(Throwable t) throws Throwable {
        throw t;
    }
}
