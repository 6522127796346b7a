package dev.kvflux.tools.bench;

import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;

/**
 * What attacks on the cluster's HTTP front doors do to legitimate traffic, in figures: each attack starts a fresh
 * cluster ({@link AttackStack}: proxy, prefill and decode processes with one notify secret), runs the legitimate load
 * through the proxy ({@link LegitLoad}: 4 clients, small prompts, half streamed) to warm it up and then idle for the
 * baseline, attacks from this JVM while the load goes on, and reports the load's success and latency against idle,
 * what the attack's own requests got, and each role's memory, death and {@code OutOfMemoryError}. The attacks come from
 * another loopback address than the legitimate clients ({@link Settings#attackerAddress}), as another host's would.
 * Linux only ({@code /proc}). Progress goes to the given stream; the figures are returned, one map per attack run.
 */
public final class HttpAttacks {
    /** Seconds of load before the baseline, for the roles' JIT. */
    static final int WARM_SECONDS = 5;
    /** Seconds of load alone, the idle baseline. */
    static final int IDLE_SECONDS = 10;

    /** An attack, by its command-line name. */
    public enum Attack {
        /** N1: connections sending their heads at 1 byte/s to the proxy's clients' port. */
        SLOWLORIS("slowloris"),
        /** N2: the same against decode's HTTP port, then prefill's. */
        SLOWLORIS_ROLE("slowloris-role"),
        /** N8: concurrent bodies just under the 16 MiB limit to the proxy. */
        BODIES("bodies"),
        /** N9: the same straight to decode and prefill, signed with another secret. */
        BODIES_SIGNED("bodies-signed"),
        /** N3: one client's requests at the model length, many at once. */
        HOG("hog"),
        /** N4: one client's longest prompts, many at once, queueing prefill work. */
        PREFILL_HOG("prefill-hog"),
        /** N6: a registered decode that answers 200 and one SSE comment, then nothing. */
        STALL("stall"),
        /** N5: a non-streaming completion that takes longer than the first-byte timeout. */
        LONG_ANSWER("long-answer"),
        /** N10: a request signed for one decode sent to another. */
        DESTINATION("destination");

        private final String wireName;

        Attack(String wireName) {
            this.wireName = wireName;
        }

        /** Its name on the command line. */
        public String wireName() {
            return wireName;
        }

        /**
         * The attack named {@code name}.
         *
         * @throws IllegalArgumentException naming the attacks there are
         */
        public static Attack of(String name) {
            for (Attack attack : values()) {
                if (attack.wireName.equals(name.strip().toLowerCase(Locale.ROOT))) {
                    return attack;
                }
            }
            throw new IllegalArgumentException("no attack named '" + name + "'; the HTTP attacks are "
                    + String.join(", ", Arrays.stream(values()).map(Attack::wireName).toList()));
        }
    }

    /**
     * How hard to attack.
     *
     * @param duration how long each attack runs (the long answer runs until it is answered)
     * @param slowlorisConnections connections a slowloris holds
     * @param bodySenders concurrent senders of 16 MiB bodies
     * @param hogRequests concurrent requests of the hog at the model length
     * @param prefillHogRequests concurrent longest prompts of the prefill hog
     * @param attackerAddress the loopback address the attacks come from
     * @param logs where the roles' logs go
     */
    public record Settings(Duration duration, int slowlorisConnections, int bodySenders, int hogRequests,
            int prefillHogRequests, String attackerAddress, Path logs) {
        public Settings {
            Objects.requireNonNull(duration, "duration");
            Objects.requireNonNull(attackerAddress, "attackerAddress");
            Objects.requireNonNull(logs, "logs");
            if (duration.toSeconds() < 1) {
                throw new IllegalArgumentException("each attack must run at least 1 s, got " + duration);
            }
            if (slowlorisConnections < 1 || bodySenders < 1 || hogRequests < 1 || prefillHogRequests < 1) {
                throw new IllegalArgumentException("connections, senders and hog requests must be positive, got "
                        + slowlorisConnections + ", " + bodySenders + ", " + hogRequests + ", " + prefillHogRequests);
            }
        }
    }

    /** An attack's work once the stack is up and the load idle: attacks, stops, returns its own figures. */
    @FunctionalInterface
    interface Body {
        Map<String, Object> run(AttackStack stack, LegitLoad load) throws Exception;
    }

    private final Settings settings;
    private final List<String> launcher;
    private final PrintStream progress;

    private HttpAttacks(Settings settings, List<String> launcher, PrintStream progress) {
        this.settings = settings;
        this.launcher = List.copyOf(launcher);
        this.progress = progress;
    }

    /**
     * Runs {@code attacks} in turn, each against a fresh stack whose roles {@code launcher} starts (the java command of
     * a role's JVM, ending with the main class). The figures are keyed by the attack's name, with the target after a
     * colon for an attack run against several ({@code slowloris-role:decode}); an attack that could not run has the
     * figure {@code error}.
     */
    public static Map<String, Map<String, Object>> run(List<Attack> attacks, Settings settings, List<String> launcher,
            PrintStream progress) throws IOException {
        Files.createDirectories(settings.logs());
        // the attacks' clients fail by the thousand, and Reactor Netty's client logs a warning for each
        if (org.slf4j.LoggerFactory.getLogger("reactor.netty") instanceof ch.qos.logback.classic.Logger netty) {
            netty.setLevel(ch.qos.logback.classic.Level.ERROR);
        }
        HttpAttacks runner = new HttpAttacks(settings, launcher, progress);
        AttackRuns runs = new AttackRuns(settings, progress);
        Map<String, Map<String, Object>> figures = new LinkedHashMap<>();
        for (Attack attack : attacks) {
            switch (attack) {
                case SLOWLORIS -> runner.measured(figures, "slowloris", 1, true,
                        (stack, load) -> runs.slowloris(stack, stack.proxy()));
                case SLOWLORIS_ROLE -> {
                    runner.measured(figures, "slowloris-role:decode", 1, true,
                            (stack, load) -> runs.slowloris(stack, stack.decode(0)));
                    runner.measured(figures, "slowloris-role:prefill", 1, true,
                            (stack, load) -> runs.slowloris(stack, stack.prefill()));
                }
                case BODIES -> runner.measured(figures, "bodies", 1, true,
                        (stack, load) -> runs.bodies(stack, load, stack.proxy(), false));
                case BODIES_SIGNED -> {
                    runner.measured(figures, "bodies-signed:decode", 1, true,
                            (stack, load) -> runs.bodies(stack, load, stack.decode(0), true));
                    runner.measured(figures, "bodies-signed:prefill", 1, true,
                            (stack, load) -> runs.bodies(stack, load, stack.prefill(), true));
                }
                case HOG -> runner.measured(figures, "hog", 1, true, (stack, load) -> runs.hog(stack,
                        HogClients.body(16_384, 16_384), settings.hogRequests()));
                case PREFILL_HOG -> runner.measured(figures, "prefill-hog", 1, true, (stack, load) -> runs.hog(stack,
                        HogClients.body(16_384, 1), settings.prefillHogRequests()));
                case STALL -> runner.measured(figures, "stall", 1, true, runs::stall);
                case LONG_ANSWER -> runner.measured(figures, "long-answer", 1, true, runs::longAnswer);
                case DESTINATION -> runner.measured(figures, "destination", 2, false, runs::destination);
            }
        }
        return figures;
    }

    /**
     * Starts a stack of {@code decodes} decodes, runs the legitimate load (when {@code legit}) warm, then idle, then
     * during {@code body}, and puts the figures under {@code label}: the attack's, the load's, the roles' memory.
     */
    private void measured(Map<String, Map<String, Object>> all, String label, int decodes, boolean legit, Body body) {
        progress.printf("%s: starting proxy, prefill and %d decode(s)...%n", label, decodes);
        Map<String, Object> figures = new LinkedHashMap<>();
        all.put(label, figures);
        try (AttackStack stack = AttackStack.start(launcher, decodes, settings.logs(), label.replace(':', '-'),
                progress)) {
            LegitLoad load = legit ? LegitLoad.start(stack.proxyUrl()) : null;
            try {
                if (legit) {
                    progress.printf("  legitimate load: %d s warm-up, %d s idle baseline...%n", WARM_SECONDS,
                            IDLE_SECONDS);
                    Thread.sleep(WARM_SECONDS * 1000L);
                    load.phase("idle");
                    Thread.sleep(IDLE_SECONDS * 1000L);
                    load.phase("during");
                }
                RssWatch rss = RssWatch.start(stack.roles());
                progress.printf("  attacking...%n");
                long start = System.nanoTime();
                figures.putAll(body.run(stack, load));
                figures.put("attack_s", AttackFigures.round((System.nanoTime() - start) / 1e9));
                if (legit) {
                    // the requests still open count too, with the time they take: the clients stop and wait for them
                    load.phase("after");
                    load.close();
                    figures.putAll(LegitLoad.figures(load.requests("idle"), load.requests("during")));
                }
                Thread.sleep(2_000);
                figures.putAll(rss.stop());
            } finally {
                if (load != null) {
                    load.close();
                }
            }
            progress.printf("  %s done%n", label);
        } catch (Exception e) {
            if (e instanceof InterruptedException) {
                Thread.currentThread().interrupt();
            }
            figures.put("error", e.toString());
            progress.printf("  %s could not run: %s%n", label, e);
        }
    }

    /** The figures as aligned {@code name value} lines, one block per attack run headed by its name. */
    public static List<String> table(Map<String, Map<String, Object>> figures) {
        List<String> lines = new ArrayList<>();
        for (Map.Entry<String, Map<String, Object>> attack : figures.entrySet()) {
            if (!lines.isEmpty()) {
                lines.add("");
            }
            lines.add("== " + attack.getKey());
            for (Map.Entry<String, Object> figure : attack.getValue().entrySet()) {
                Object value = figure.getValue();
                lines.add(String.format(Locale.ROOT, "%-46s %s", figure.getKey(), value instanceof Double d
                        ? String.format(Locale.ROOT, "%.2f", d) : value));
            }
        }
        return lines;
    }
}
