package dev.kvflux.tools.scale;

import dev.kvflux.operators.FailMode;
import dev.kvflux.operators.WaitStrategy;
import dev.kvflux.tools.repro.ReproStrategy;
import java.util.Arrays;
import java.util.List;
import java.util.stream.Stream;

/**
 * One wait the scale bench measures: a {@link ReproStrategy} that needs no engine, in one fail mode, named
 * as the strategy is with {@value #DRAIN_SUFFIX} added for the drain mode ({@code reactive},
 * {@code reactive-shared-drain}). The strategies' names live in {@link ReproStrategy} alone.
 */
record BenchWait(ReproStrategy strategy, FailMode mode) {
    static final String DRAIN_SUFFIX = "-drain";

    /** Every wait the bench knows, the fail-fast ones first, in {@link ReproStrategy}'s order. */
    static final List<BenchWait> ALL = Stream.of(FailMode.FAIL_FAST, FailMode.DRAIN)
            .flatMap(mode -> Arrays.stream(ReproStrategy.values()).filter(s -> !s.callsEngine())
                    .map(s -> new BenchWait(s, mode)))
            .toList();

    /** Their names, in the same order. */
    static final List<String> NAMES = ALL.stream().map(BenchWait::name).toList();

    BenchWait {
        if (strategy.callsEngine()) {
            throw new IllegalArgumentException(strategy.label() + " calls the engine's waitAll, which the bench has"
                    + " not; choose from " + String.join(", ", NAMES));
        }
    }

    /**
     * The wait called {@code name}.
     *
     * @throws IllegalArgumentException naming the known waits if there is none by that name
     */
    static BenchWait named(String name) {
        return ALL.stream().filter(w -> w.name().equals(name)).findFirst().orElseThrow(() ->
                new IllegalArgumentException("unknown strategy '" + name + "'; choose from " + String.join(", ", NAMES)));
    }

    String name() {
        return strategy.label() + (mode == FailMode.DRAIN ? DRAIN_SUFFIX : "");
    }

    /** Whether its statuses are completed by a push. */
    boolean pushes() {
        return strategy.push();
    }

    /** The operator, on its default scheduler, with the settings' timeout and slice. */
    WaitStrategy wait(ScaleBench.Settings settings) {
        return strategy.wait(null, mode, settings.transferTimeout(), settings.slice());
    }
}
