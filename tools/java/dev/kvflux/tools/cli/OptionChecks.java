package dev.kvflux.tools.cli;

import dev.kvflux.operators.WaitSpec;
import dev.kvflux.serving.config.Durations;
import java.net.URI;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine;

/**
 * Checks of option values before a command does anything: each throws a {@link ParameterException}
 * naming the option, the value and what it should be, which the CLI prints as one line with exit code 2.
 */
final class OptionChecks {
    /** The most KV blocks a simulated role may be given: 2^24, far beyond any real cache's block count. */
    static final int MAX_KV_BLOCKS = 1 << 24;

    private OptionChecks() {
    }

    /** Nothing if {@code ok}, else {@code message} as a usage error. */
    static void require(CommandLine cmd, boolean ok, String message) {
        if (!ok) {
            throw new ParameterException(cmd, message);
        }
    }

    /** {@code value} unless it is null or not positive; {@code null} passes (the option was not given). */
    static Duration positive(CommandLine cmd, String option, Duration value) {
        if (value != null && (value.isZero() || value.isNegative())) {
            throw new ParameterException(cmd, option + " must be greater than zero, got " + Durations.format(value));
        }
        return value;
    }

    /** A positive transfer timeout of at most {@link WaitSpec#MAX_TRANSFER_TIMEOUT}; {@code null} passes. */
    static Duration transferTimeout(CommandLine cmd, String option, Duration value) {
        positive(cmd, option, value);
        if (value != null && value.compareTo(WaitSpec.MAX_TRANSFER_TIMEOUT) > 0) {
            throw new ParameterException(cmd, option + " must be at most 24h, got " + Durations.format(value)
                    + "; a stalled transfer would hold its request that long");
        }
        return value;
    }

    /** {@code value} within {@code min} to {@code max}. */
    static int inRange(CommandLine cmd, String option, int value, int min, int max) {
        if (value < min || value > max) {
            throw new ParameterException(cmd, option + " must be from " + min + " to " + max + ", got " + value);
        }
        return value;
    }

    /** Every value within {@code min} to {@code max}. */
    static List<Integer> allInRange(CommandLine cmd, String option, List<Integer> values, int min, int max) {
        for (int value : values) {
            inRange(cmd, option, value, min, max);
        }
        return values;
    }

    /** A port from 0 (any free port) to 65535; {@code null} passes. */
    static Integer port(CommandLine cmd, String option, Integer value) {
        if (value != null) {
            inRange(cmd, option, value, 0, 65535);
        }
        return value;
    }

    /** An {@code http://host:port} URL; {@code null} passes. */
    /**
     * {@code value} as {@code HOST:PORT} (a host name or IP address, and a port from 1 to 65535).
     *
     * @throws CommandLine.ParameterException one line naming the option and the value
     */
    static java.net.InetSocketAddress hostPort(CommandLine cmd, String option, String value) {
        try {
            return dev.kvflux.serving.api.Instance.address(value);
        } catch (IllegalArgumentException e) {
            throw new CommandLine.ParameterException(cmd, option + ": " + e.getMessage());
        }
    }

    static String httpUrl(CommandLine cmd, String option, String value) {
        if (value == null) {
            return null;
        }
        try {
            URI uri = new URI(value);
            if (("http".equals(uri.getScheme()) || "https".equals(uri.getScheme())) && uri.getHost() != null) {
                return value;
            }
        } catch (URISyntaxException e) {
            // reported below
        }
        throw new ParameterException(cmd, option + " must be an http URL such as http://127.0.0.1:11353, got '"
                + value + "'");
    }

    /**
     * A file that can be written: its folder exists and is writable, and it is not a folder itself nor a
     * read-only file; {@code null} passes. Checked before a long run, so a typo does not lose its results.
     */
    static Path writableFile(CommandLine cmd, String option, Path value) {
        if (value == null) {
            return null;
        }
        Path folder = value.toAbsolutePath().getParent();
        if (folder == null || !Files.isDirectory(folder)) {
            throw new ParameterException(cmd, option + " " + value + ": folder " + folder + " does not exist; create it"
                    + " or pick another path");
        }
        if (Files.isDirectory(value)) {
            throw new ParameterException(cmd, option + " " + value + " is a folder; give a file name such as "
                    + value.resolve("report.html"));
        }
        if (Files.exists(value) ? !Files.isWritable(value) : !Files.isWritable(folder)) {
            throw new ParameterException(cmd, option + " " + value + " cannot be written (permissions); pick another"
                    + " path");
        }
        return value;
    }

    /**
     * Refuses {@code host} when it is not a loopback address and no notify secret ({@code auth}) is set: the roles'
     * and the proxy's ports would then take unsigned requests and registrations from the network.
     */
    static void secretOffLoopback(CommandLine cmd, String option, String host, Object auth) {
        if (auth == null && !dev.kvflux.serving.http.HttpLimits.isLoopback(host)) {
            throw new CommandLine.ParameterException(cmd, option + " " + host + " is not a loopback address and no"
                    + " notify secret is set: set KVFLUX_NOTIFY_SECRET (or notify.secret) on the proxy and every"
                    + " instance, so that only the cluster can send them requests");
        }
    }
}
