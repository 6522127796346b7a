package dev.kvflux.tools.cli;

import dev.kvflux.tools.bench.ProxyProbe;
import dev.kvflux.serving.http.HttpJson;
import dev.kvflux.serving.http.HttpLimits;
import java.io.IOException;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/** {@code kvflux proxy-probe}: the proxy against invalid requests, registration floods and idle connections. */
@Command(name = "proxy-probe", mixinStandardHelpOptions = true,
        description = {"Starts a proxy, a prefill and a decode instance on loopback (signed notifications and"
                + " registrations) and measures: identical invalid completions (answers by status, how many reached"
                + " prefill), a flood of unsigned registrations (answers, whether clients are still served), a flood"
                + " on an unsigned proxy (answers, instances held under the cap), requests straight to the roles (unsigned,"
                + " forged, replayed, stale: answers, connections the roles open, blocks held, the proxy's latency"
                + " meanwhile), prompts over the model length, a hijacking registration, blackhole decodes (how soon"
                + " they are ejected, the answers after), and idle connections (open files, /health latency, when the"
                + " proxy closes them). One line per step on stderr; the figures on stdout."})
public final class ProxyProbeCommand implements Callable<Integer> {
    @Spec
    CommandLine.Model.CommandSpec spec;

    @Option(names = "--invalid-requests", paramLabel = "N", description = "Invalid completions sent (default ${DEFAULT-VALUE}).")
    int invalidRequests = 200;

    @Option(names = "--registrations", paramLabel = "N", description = "Bogus registrations per flood (default ${DEFAULT-VALUE}).")
    int registrations = 20_000;

    @Option(names = "--idle-connections", paramLabel = "N", description = "Idle connections opened (default ${DEFAULT-VALUE}).")
    int idleConnections = 2_000;

    @Option(names = "--direct-requests", paramLabel = "N",
            description = "Requests sent straight to prefill and decode, unsigned, forged, replayed and stale, while"
                    + " clients use the proxy; then prompts over the model length, a hijacking registration and"
                    + " blackhole decodes. 0 skips these steps (default ${DEFAULT-VALUE}).")
    int directRequests = 10_000;

    @Option(names = "--idle-timeout", paramLabel = "DURATION", converter = DurationConverter.class,
            description = "The proxy's idle timeout for this run (default 60s, the proxy's own default).")
    Duration idleTimeout = HttpLimits.DEFAULT.idleTimeout();

    @Override
    public Integer call() throws IOException {
        CommandLine cmd = spec.commandLine();
        OptionChecks.inRange(cmd, "--invalid-requests", invalidRequests, 1, 1_000_000);
        OptionChecks.inRange(cmd, "--registrations", registrations, 1, 10_000_000);
        OptionChecks.inRange(cmd, "--idle-connections", idleConnections, 1, 100_000);
        OptionChecks.positive(cmd, "--idle-timeout", idleTimeout);
        OptionChecks.inRange(cmd, "--direct-requests", directRequests, 0, 10_000_000);
        Map<String, Object> figures = new ProxyProbe(new ProxyProbe.Settings(invalidRequests, registrations,
                idleConnections, idleTimeout, directRequests), System.err).run();
        System.out.println(HttpJson.write(HttpJson.MAPPER.valueToTree(figures)));
        return 0;
    }
}
