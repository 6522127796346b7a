package dev.kvflux.operators;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.TransferStatus;
import dev.kvflux.testing.ScriptedStatus;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.From;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.Size;
import reactor.test.scheduler.VirtualTimeScheduler;

/** Properties of {@link CompletionWait} over random completion times and failures, on virtual time. */
class CompletionWaitPropertiesTest {
    private static final long SLICE_MS = 10;
    private static final Duration TIMEOUT = Duration.ofSeconds(30);

    /** One status's script: finishes (or fails) at {@code atMs}, with {@code code}. */
    record Script(long atMs, StatusCode code) {
    }

    @Provide
    Arbitrary<Script> successes() {
        return Arbitraries.longs().between(0, 5_000).map(ms -> new Script(ms, StatusCode.SUCCESS));
    }

    @Provide
    Arbitrary<Script> mixed() {
        Arbitrary<StatusCode> codes = Arbitraries.of(StatusCode.SUCCESS, StatusCode.SUCCESS, StatusCode.SUCCESS,
                StatusCode.ERR_GPU_OP, StatusCode.ERR_RDMA_OP, StatusCode.ERR_BAD_STATE);
        return Combinators.combine(Arbitraries.longs().between(0, 5_000), codes).as(Script::new);
    }

    /** Subscribes, advances virtual time, and returns the signal time and error (null on success). */
    /** The wait under test; a subclass runs every property here on another variant. */
    CompletionWait wait(FailMode mode) {
        return CompletionWait.of(mode, TIMEOUT);
    }

    private Object[] run(FailMode mode, List<Script> scripts) {
        VirtualTimeScheduler clock = VirtualTimeScheduler.create();
        List<TransferStatus> statuses = new ArrayList<>();
        for (Script s : scripts) {
            statuses.add(s.code() == StatusCode.SUCCESS
                    ? ScriptedStatus.succeedsAt(clock, Duration.ofMillis(s.atMs()))
                    : ScriptedStatus.failsAt(clock, Duration.ofMillis(s.atMs()), s.code(), "failed at " + s.atMs()));
        }
        AtomicLong at = new AtomicLong(-1);
        AtomicReference<Throwable> error = new AtomicReference<>();
        wait(mode).scheduler(clock).await(statuses).subscribe(null,
                e -> {
                    error.set(e);
                    at.set(clock.now(TimeUnit.MILLISECONDS));
                },
                () -> at.set(clock.now(TimeUnit.MILLISECONDS)));
        clock.advanceTimeBy(TIMEOUT.plusSeconds(1));
        assertThat(at.get()).as("the wait signalled").isGreaterThanOrEqualTo(0);
        return new Object[] {at.get(), error.get()};
    }

    private static long roundUpToSlice(long ms) {
        return (ms + SLICE_MS - 1) / SLICE_MS * SLICE_MS;
    }

    @Property(tries = 200)
    void completionTimeIsTheLastFinishRoundedUpToTheSlice(
            @ForAll @Size(min = 1, max = 20) List<@From("successes") Script> scripts) {
        long last = scripts.stream().mapToLong(Script::atMs).max().orElseThrow();

        Object[] end = run(FailMode.FAIL_FAST, scripts);

        assertThat(end[1]).isNull();
        assertThat((long) end[0]).isEqualTo(roundUpToSlice(last));
    }

    @Property(tries = 200)
    void failFastErrorsAtTheFirstFailureRoundedUpToTheSlice(
            @ForAll @Size(min = 1, max = 20) List<@From("mixed") Script> scripts) {
        long firstFailure = scripts.stream().filter(s -> s.code().isFailure()).mapToLong(Script::atMs)
                .min().orElse(-1);

        Object[] end = run(FailMode.FAIL_FAST, scripts);

        if (firstFailure < 0) {
            assertThat(end[1]).isNull();
        } else {
            assertThat(end[1]).isInstanceOf(TransferException.class);
            assertThat((long) end[0]).isEqualTo(roundUpToSlice(firstFailure));
        }
    }

    @Property(tries = 200)
    void drainErrorsOnceTheLastStatusIsTerminal(
            @ForAll @Size(min = 1, max = 20) List<@From("mixed") Script> scripts) {
        long last = scripts.stream().mapToLong(Script::atMs).max().orElseThrow();
        boolean anyFailure = scripts.stream().anyMatch(s -> s.code().isFailure());

        Object[] end = run(FailMode.DRAIN, scripts);

        assertThat(end[1] != null).isEqualTo(anyFailure);
        assertThat((long) end[0]).isEqualTo(roundUpToSlice(last));
    }

    @Property(tries = 200)
    void theEarliestListedFailureSeenGivesTheCode(
            @ForAll @Size(min = 1, max = 20) List<@From("mixed") Script> scripts) {
        // In drain mode every failure has been seen when the wait errors: the earliest in the list wins.
        Script earliestListed = scripts.stream().filter(s -> s.code().isFailure()).findFirst().orElse(null);

        Object[] end = run(FailMode.DRAIN, scripts);

        if (earliestListed == null) {
            assertThat(end[1]).isNull();
        } else {
            TransferException e = (TransferException) end[1];
            assertThat(e.code()).isEqualTo(earliestListed.code());
            assertThat(e.reason()).isEqualTo("failed at " + earliestListed.atMs());
        }
    }
}
