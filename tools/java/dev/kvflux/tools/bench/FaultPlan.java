package dev.kvflux.tools.bench;

import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.sim.Fault;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;

/**
 * Which requests of a run get an injected status failure: a count ({@code 3}) or a share of the prompts
 * ({@code 5%}, {@code 0.05}), chosen with a seeded random generator so a run repeats. The failure is
 * put on the last layer's batch of the chosen request in posting order (batch ordinal
 * {@code request × layers + layers - 1}), which fails 1 ms after its post with ERR_GPU_OP. Where
 * requests' layers interleave (the reactive pipeline writes several at once) the batch may belong to a
 * neighbouring request; the number of failed batches is the same.
 */
public record FaultPlan(String spec, double share, int count) {

    public static final FaultPlan NONE = new FaultPlan("none", 0, 0);

    /**
     * Parses {@code 3}, {@code 5%} or {@code 0.05}.
     *
     * @throws IllegalArgumentException saying what is accepted
     */
    public static FaultPlan parse(String spec) {
        String text = spec.trim();
        try {
            if (text.endsWith("%")) {
                return share(text, Double.parseDouble(text.substring(0, text.length() - 1)) / 100);
            }
            if (text.contains(".")) {
                return share(text, Double.parseDouble(text));
            }
            int count = Integer.parseInt(text);
            if (count < 0) {
                throw new NumberFormatException();
            }
            return new FaultPlan(text, 0, count);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("--inject-failures '" + spec + "' is not a count (3), a percentage"
                    + " (5%) or a fraction (0.05) of the prompts");
        }
    }

    private static FaultPlan share(String text, double share) {
        if (!(share >= 0 && share <= 1)) {
            throw new NumberFormatException();
        }
        return new FaultPlan(text, share, -1);
    }

    /** How many requests of {@code prompts} get a failure. */
    public int requests(int prompts) {
        return Math.min(prompts, count >= 0 ? count : (int) Math.round(share * prompts));
    }

    /** The engine faults for a run of {@code prompts} requests of {@code layers} layers each. */
    public List<Fault> faults(int prompts, int layers, long seed) {
        int n = requests(prompts);
        List<Integer> order = new ArrayList<>();
        for (int i = 0; i < prompts; i++) {
            order.add(i);
        }
        java.util.Collections.shuffle(order, new Random(seed));
        List<Fault> faults = new ArrayList<>();
        for (int request : order.subList(0, n).stream().sorted().toList()) {
            long ordinal = (long) request * layers + layers - 1;
            faults.add(Fault.fail(ordinal, Duration.ofMillis(1), StatusCode.ERR_GPU_OP,
                    "injected fault: xGMI copy of batch " + ordinal + " failed"));
        }
        return faults;
    }
}
