package dev.kvflux.serving.config;

import dev.kvflux.bindings.sim.CopyPath;
import dev.kvflux.operators.FailMode;
import dev.kvflux.operators.WaitSpec;
import dev.kvflux.serving.etcd.EtcdDiscovery;
import dev.kvflux.transfer.KvMode;
import java.net.URI;
import java.net.URISyntaxException;
import java.time.Duration;
import java.util.Locale;
import java.util.Optional;

/**
 * The parsers of {@link KvfluxConfig}'s values: each takes what YAML read for one key and returns it checked, or throws
 * an {@link IllegalArgumentException} whose message says what the key must be.
 */
final class ConfigValues {
    private ConfigValues() {
    }

    /** {@code off} (which YAML also reads as {@code false}) or a positive duration. */
    static Optional<Duration> stallAfter(Object v) {
        String text = String.valueOf(v).trim().toLowerCase(Locale.ROOT);
        if (text.equals("off") || text.equals("false")) {
            return Optional.empty();
        }
        return Optional.of(positive(Durations.parse(text)));
    }

    static Duration positive(Duration d) {
        if (d.isZero() || d.isNegative()) {
            throw new IllegalArgumentException("must be greater than zero, got " + Durations.format(d));
        }
        return d;
    }

    static Duration transferTimeout(Duration d) {
        positive(d);
        if (d.compareTo(WaitSpec.MAX_TRANSFER_TIMEOUT) > 0) {
            throw new IllegalArgumentException("must be at most 24h, got " + Durations.format(d)
                    + "; a stalled transfer would hold its request that long");
        }
        return d;
    }

    static FailMode failMode(Object v) {
        return switch (String.valueOf(v).toLowerCase(Locale.ROOT)) {
            case "fail-fast" -> FailMode.FAIL_FAST;
            case "drain" -> FailMode.DRAIN;
            default -> throw new IllegalArgumentException("'" + v + "' is not a fail mode; use fail-fast or drain");
        };
    }

    /** {@code transfer.push-signal}: whether a push wait signals on the push's own thread ({@code push-thread}). */
    static boolean signalOnPush(Object v) {
        return switch (String.valueOf(v).toLowerCase(Locale.ROOT)) {
            case "scheduler" -> false;
            case "push-thread" -> true;
            default -> throw new IllegalArgumentException("'" + v + "' is not a push signal; use scheduler or"
                    + " push-thread");
        };
    }

    static CopyPath copyPath(Object v) {
        return switch (String.valueOf(v).toLowerCase(Locale.ROOT)) {
            case "default" -> CopyPath.DEFAULT;
            case "scatter-gather" -> CopyPath.SCATTER_GATHER;
            default -> throw new IllegalArgumentException("'" + v + "' is not a copy path; use default or scatter-gather");
        };
    }

    static String backend(Object v) {
        String name = String.valueOf(v).trim();
        if (name.isEmpty()) {
            throw new IllegalArgumentException("is empty; name a backend, such as sim-xgmi");
        }
        return name;
    }

    static KvMode kvMode(Object v) {
        try {
            return KvMode.of(String.valueOf(v));
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("is '" + v + "'; expected write (prefill writes into decode) or read"
                    + " (decode reads from prefill)");
        }
    }

    static double bandwidth(Object v) {
        double gbps;
        try {
            gbps = Double.parseDouble(String.valueOf(v));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("'" + v + "' is not a number of GB/s");
        }
        if (!(gbps > 0) || Double.isInfinite(gbps)) {
            throw new IllegalArgumentException("must be a positive number of GB/s, got " + v);
        }
        return gbps;
    }

    static int intIn(Object v, int min, int max) {
        int n;
        try {
            n = Integer.parseInt(String.valueOf(v).trim());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("'" + v + "' is not a whole number");
        }
        if (n < min || n > max) {
            throw new IllegalArgumentException("must be between " + min + " and " + max + ", got " + n);
        }
        return n;
    }

    static String secret(Object v) {
        String secret = String.valueOf(v);
        if (!secret.isEmpty() && secret.length() < 16) {
            throw new IllegalArgumentException("is " + secret.length() + " characters; use at least 16 (for example"
                    + " the output of `openssl rand -hex 32`), or \"\" for no secret");
        }
        return secret;
    }

    /** Empty for "" (the built-in registry), else etcd's endpoints. */
    static Optional<EtcdDiscovery> etcd(Object v) {
        String text = String.valueOf(v).trim();
        return text.isEmpty() ? Optional.empty() : Optional.of(EtcdDiscovery.parse(text));
    }

    /** Empty for "" (no export), else an http or https URL with a host. */
    static Optional<URI> otlpEndpoint(String text) {
        String trimmed = text.trim();
        if (trimmed.isEmpty()) {
            return Optional.empty();
        }
        URI uri;
        try {
            uri = new URI(trimmed);
        } catch (URISyntaxException e) {
            throw new IllegalArgumentException("'" + trimmed + "' is not a URL; give the collector's OTLP/HTTP traces"
                    + " URL, such as http://127.0.0.1:4318/v1/traces, or \"\" for no export");
        }
        if (!("http".equals(uri.getScheme()) || "https".equals(uri.getScheme())) || uri.getHost() == null) {
            throw new IllegalArgumentException("'" + trimmed + "' is not an http or https URL with a host; give the"
                    + " collector's OTLP/HTTP traces URL, such as http://127.0.0.1:4318/v1/traces");
        }
        return Optional.of(uri);
    }

    static double probability(Object v) {
        double p;
        try {
            p = Double.parseDouble(String.valueOf(v).trim());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("'" + v + "' is not a number; use 0 to 1 (1 keeps every trace)");
        }
        if (!(p >= 0 && p <= 1)) {
            throw new IllegalArgumentException("must be from 0 to 1 (1 keeps every trace), got " + v);
        }
        return p;
    }

    static double share(Object v) {
        double p;
        try {
            p = Double.parseDouble(String.valueOf(v).trim());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("'" + v + "' is not a number; use more than 0 and at most 1 (0.25: a"
                    + " quarter of the role's blocks)");
        }
        if (!(p > 0 && p <= 1)) {
            throw new IllegalArgumentException("must be more than 0 and at most 1 (0.25: a quarter of the role's"
                    + " blocks), got " + v);
        }
        return p;
    }

    static int port(Object v) {
        return intIn(v, 1, 65535);
    }
}
