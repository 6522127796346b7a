package dev.kvflux.pipeline.repro;

import dev.kvflux.operators.CompletionWait;
import dev.kvflux.operators.NativeWait;
import dev.kvflux.operators.PushWait;
import dev.kvflux.operators.SlicedNativeWait;
import dev.kvflux.operators.WaitStrategy;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;

/**
 * The wait strategies {@code kvflux repro --wait} knows, by name: one line each, with how many requests
 * it times when {@code --requests} is not given.
 *
 * <p>To add one, add a line with its name, its default request count, and a {@link Factory} building
 * it for a target (its engine, for native calls) and the run's settings (timeout, slice).
 */
public final class ReproStrategies {

    /** Builds a strategy for one target and one run's settings. */
    @FunctionalInterface
    public interface Factory {
        WaitStrategy create(ReproTarget target, ReproSettings settings);
    }

    /** A registered strategy. */
    public record Entry(String name, int defaultRequests, Factory factory) {
    }

    private static final Map<String, Entry> STRATEGIES = new LinkedHashMap<>();

    static {
        add("native", 2, (t, s) -> NativeWait.of(t.engine(), s.transferTimeout()));
        add("sliced-native", 100, (t, s) -> SlicedNativeWait.failFast(t.engine(), s.transferTimeout()).slice(s.slice()));
        add("reactive", 100, (t, s) -> CompletionWait.failFast(s.transferTimeout()).slice(s.slice()));
        add("reactive-push", 100, (t, s) -> PushWait.of(s.transferTimeout()));
    }

    private ReproStrategies() {
    }

    private static void add(String name, int defaultRequests, Factory factory) {
        STRATEGIES.put(name, new Entry(name, defaultRequests, factory));
    }

    public static Set<String> names() {
        return STRATEGIES.keySet();
    }

    /**
     * The strategy called {@code name}.
     *
     * @throws IllegalArgumentException naming the known strategies if there is none by that name
     */
    public static Entry named(String name) {
        Entry entry = STRATEGIES.get(name);
        if (entry == null) {
            throw new IllegalArgumentException("unknown wait strategy '" + name + "'; known strategies: "
                    + String.join(", ", STRATEGIES.keySet()));
        }
        return entry;
    }
}
