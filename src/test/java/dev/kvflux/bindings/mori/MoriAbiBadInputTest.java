package dev.kvflux.bindings.mori;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

import dev.kvflux.bindings.BatchPlan;
import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.mori.internal.MoriNative;
import dev.kvflux.bindings.mori.internal.NativeLibraries;
import dev.kvflux.operators.CompletionWait;
import dev.kvflux.operators.TransferException;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import dev.kvflux.testing.NoLiveSimHandles;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.function.Executable;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/**
 * Bad input through the C ABI is a clear error code and message, never a crash: each test makes the
 * bad call, checks the error, then shows the library still works.
 */
@ExtendWith(NoLiveSimHandles.class)
class MoriAbiBadInputTest {
    private static final MoriNative LIB = NativeLibraries.simulator();

    private static MoriIoException abiError(Executable call) {
        return catchThrowableOfType(MoriIoException.class, () -> {
            try {
                call.execute();
            } catch (Throwable t) {
                throw t instanceof Exception e ? e : new RuntimeException(t);
            }
        });
    }

    private static void assertStillWorks(SimPair pair) {
        MoriStatus status = (MoriStatus) pair.session.batchWrite(BatchPlan.mirrored(new long[] {0}, 64), 1);
        assertThat(pair.p.waitAll(List.of(status), -1)).isEqualTo(StatusCode.SUCCESS);
    }

    @Test
    void aNullHandleIsABadHandle() {
        MoriIoException error = abiError(() -> LIB.statusCode(0));
        assertThat(error.errorName()).isEqualTo("KVFLUX_MORI_E_BAD_HANDLE");
        assertThat(error.getMessage()).contains("kvflux_mori_status_code", "handle is 0 (null)");
    }

    @Test
    void aReleasedStatusIsABadHandle() {
        try (SimPair pair = new SimPair("bad-released", 4096)) {
            MoriStatus status = (MoriStatus) pair.session.batchWrite(BatchPlan.mirrored(new long[] {0}, 64), 1);
            status.close();

            MoriIoException error = abiError(status::code);
            assertThat(error.errorName()).isEqualTo("KVFLUX_MORI_E_BAD_HANDLE");
            assertThat(error.getMessage()).contains("was released");
            assertStillWorks(pair);
        }
    }

    @Test
    void aHandleOfAnotherKindIsABadHandle() {
        try (SimPair pair = new SimPair("bad-kind", 4096)) {
            long engine = pair.p.engine().handle();
            MoriIoException error = abiError(() -> LIB.statusCode(engine));
            assertThat(error.errorName()).isEqualTo("KVFLUX_MORI_E_BAD_HANDLE");
            assertThat(error.getMessage()).contains("is of kind 'engine', not 'status'");
            assertStillWorks(pair);
        }
    }

    @Test
    void aReleasedStatusInWaitAllIsABadHandleNamingItsIndex() {
        try (SimPair pair = new SimPair("bad-wait", 4096)) {
            MoriStatus kept = (MoriStatus) pair.session.batchWrite(BatchPlan.mirrored(new long[] {0}, 64), 1);
            MoriStatus released = (MoriStatus) pair.session.batchWrite(BatchPlan.mirrored(new long[] {64}, 64), 2);
            released.close();

            MoriIoException error = abiError(() -> pair.p.engine().waitAll(List.of(kept, released), 0));
            assertThat(error.errorName()).isEqualTo("KVFLUX_MORI_E_BAD_HANDLE");
            assertThat(error.getMessage()).contains("status 1 of 2");
            assertStillWorks(pair);
        }
    }

    @Test
    void arraysOfDifferentLengthsAreInvalid() {
        try (SimPair pair = new SimPair("bad-lengths", 4096)) {
            MoriSession session = (MoriSession) pair.session;
            MoriIoException error = abiError(
                    () -> session.batchWrite(new long[] {0, 64}, new long[] {0}, new long[] {64, 64}, 1));
            assertThat(error.errorName()).isEqualTo("KVFLUX_MORI_E_INVALID_ARG");
            assertThat(error.getMessage()).contains("2 local offsets, 1 remote offsets, 2 sizes");
            assertStillWorks(pair);
        }
    }

    @Test
    void aBlockPastTheRegisteredSizeIsInvalid() {
        try (SimPair pair = new SimPair("bad-range", 4096)) {
            MoriSession session = (MoriSession) pair.session;
            MoriIoException error = abiError(
                    () -> session.batchWrite(new long[] {0}, new long[] {4000}, new long[] {200}, 1));
            assertThat(error.errorName()).isEqualTo("KVFLUX_MORI_E_INVALID_ARG");
            assertThat(error.getMessage()).contains("block 0", "runs past the remote region's 4096 bytes");
            assertStillWorks(pair);
        }
    }

    @Test
    void anOffsetThatWouldWrapAroundIsInvalid() {
        try (SimPair pair = new SimPair("bad-wrap", 4096)) {
            MoriSession session = (MoriSession) pair.session;
            MoriIoException error = abiError(
                    () -> session.batchRead(new long[] {-64}, new long[] {0}, new long[] {128}, 1));
            assertThat(error.errorName()).isEqualTo("KVFLUX_MORI_E_INVALID_ARG");
            assertThat(error.getMessage()).contains("runs past the local region's 4096 bytes");
            assertStillWorks(pair);
        }
    }

    @Test
    void closingTheEngineUnderARunningWaitFailsTheWaitWithABadHandle() {
        SimPair pair = new SimPair("close-under-wait", 4096);
        pair.sim.hangNth(pair.p.engine(), 1);
        MoriStatus status = (MoriStatus) pair.session.batchWrite(BatchPlan.mirrored(new long[] {0}, 64), 1);
        Mono<Void> wait = CompletionWait.failFast(Duration.ofSeconds(5)).await(List.of(status));
        Schedulers.parallel().schedule(pair::close, 50, TimeUnit.MILLISECONDS);

        // The wait keeps its contract: ERR_BAD_STATE, with the ABI's error as the cause.
        TransferException failed = catchThrowableOfType(TransferException.class, wait::block);
        assertThat(failed.code()).isEqualTo(StatusCode.ERR_BAD_STATE);
        assertThat(failed.getCause()).isInstanceOf(MoriIoException.class);
        MoriIoException error = (MoriIoException) failed.getCause();
        assertThat(error.errorName()).isEqualTo("KVFLUX_MORI_E_BAD_HANDLE");
        assertThat(error.getMessage()).contains("kvflux_mori_status_code", "was released");
    }

    @Test
    void closingTheEngineReleasesEveryHandleItOwns() {
        MoriSimulator sim = MoriIo.simulator().simulatorControls().orElseThrow();
        SimPair pair = new SimPair("cascade", 4096);
        pair.session.batchWrite(BatchPlan.mirrored(new long[] {0}, 64), 1);
        assertThat(sim.liveHandles()).isEqualTo(7); // 2 engines, 2 registrations, 1 import, 1 session, 1 status
        pair.close();
        assertThat(sim.liveHandles()).isZero();
    }
}
