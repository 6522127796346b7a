package dev.kvflux.tools.cli;

import dev.kvflux.serving.config.KvfluxConfig;
import dev.kvflux.serving.observe.Tracing;
import dev.kvflux.serving.proxy.ClientKeys;
import dev.kvflux.serving.vllm.Networks;
import dev.kvflux.serving.proxy.InstanceRegistry;
import dev.kvflux.serving.proxy.FirstToken;
import dev.kvflux.serving.proxy.ProxyServer;
import dev.kvflux.transfer.notify.NotifyAuth;
import dev.kvflux.serving.etcd.EtcdDiscovery;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;
import picocli.CommandLine;
import reactor.core.scheduler.Schedulers;

/** {@code kvflux proxy}: the OpenAI-style front that pairs a prefill and a decode instance per request. */
@Command(name = "proxy", mixinStandardHelpOptions = true,
        description = {"Runs the disaggregated-serving proxy: POST /v1/completions goes to a prefill (max_tokens=1)"
                + " and a decode instance, decode's answer streams back. Instances register on the discovery"
                + " port only, signed with the notify secret when one is set (notify.secret or KVFLUX_NOTIFY_SECRET), and"
                + " are dropped when they stop pinging; with --discovery etcd://HOST:PORT the proxy also reads and watches"
                + " the cluster's records in etcd, so several proxies route the same cluster and a restarted one routes"
                + " at once. Ports default to the configuration's. Give it the same notify secret as the roles"
                + " (KVFLUX_NOTIFY_SECRET): a role with a secret refuses a proxy without one."})
public final class ProxyCommand implements Callable<Integer> {
    @Spec
    CommandLine.Model.CommandSpec spec;

    @Mixin
    ConfigOptions configOptions;

    @Mixin
    TracingOptions tracingOptions;

    @Mixin
    DiscoveryOptions discoveryOptions;

    @Option(names = "--host", description = "Address to bind (default ${DEFAULT-VALUE}).")
    String host = "127.0.0.1";

    @Option(names = "--port", paramLabel = "PORT", description = "HTTP port for clients (default: ports.proxy).")
    Integer port;

    @Option(names = "--discovery-port", paramLabel = "PORT",
            description = "Port where instances register (default: ports.proxy-discovery).")
    Integer discoveryPort;

    @Option(names = "--instance-ttl", paramLabel = "DURATION", converter = DurationConverter.class,
            description = "Drop an instance this long after its last ping (default 10s; instances ping every 3s).")
    Duration instanceTtl = Duration.ofSeconds(10);

    @Option(names = "--upstream-timeout", paramLabel = "DURATION", converter = DurationConverter.class,
            description = "Answer 504 when an instance's answer sends nothing for this long (default 10m).")
    Duration upstreamTimeout = ProxyServer.DEFAULT_UPSTREAM_TIMEOUT;

    @Option(names = "--max-model-len", paramLabel = "TOKENS",
            description = "The longest request, prompt and max_tokens together; longer ones get 400 before any"
                    + " instance sees them (default: limits.max-model-len, 32768).")
    Integer maxModelLen;

    @Option(names = "--max-in-flight", paramLabel = "N",
            description = "At most N completions past the proxy at once; the others wait at the proxy in arrival"
                    + " order, before prefill or decode sees them (default 0: no limit). Under a load that keeps the"
                    + " roles' cores busy, a few in flight shorten each request's hand-offs between the roles.")
    int maxInFlight;

    @Option(names = "--max-queued", paramLabel = "N",
            description = "With --max-in-flight: how many may wait; one more gets 503 proxy_queue_full with"
                    + " Retry-After: 1 (default ${DEFAULT-VALUE}).")
    int maxQueued = ProxyServer.DEFAULT_MAX_QUEUED;

    @Option(names = "--first-byte-timeout", paramLabel = "DURATION", converter = DurationConverter.class,
            description = "Answer 504 when decode sends no first byte for this long, and send a canary request"
                    + " through it to learn whether it is to blame (default 60s; keep it above decode's receive"
                    + " deadline). A non-streamed answer, which comes whole at its end, gets --token-timeout more per"
                    + " token of its max_tokens.")
    Duration firstByteTimeout = ProxyServer.DEFAULT_FIRST_BYTE_TIMEOUT;

    @Option(names = "--token-timeout", paramLabel = "DURATION", converter = DurationConverter.class,
            description = "How much longer than --first-byte-timeout a non-streamed answer may take per token of its"
                    + " max_tokens (default 100ms: 4,000 tokens may take 60s + 400s).")
    Duration tokenTimeout = ProxyServer.DEFAULT_TOKEN_TIMEOUT;

    @Option(names = "--first-token", paramLabel = "SOURCE",
            description = "Where a streamed completion's first token comes from: decode (its stream, whole, as vLLM's"
                    + " proxy; the default) or prefill (prefill's token is sent at once, then decode's stream from its"
                    + " second token).")
    String firstToken = "decode";

    @Option(names = "--stall-timeout", paramLabel = "DURATION", converter = DurationConverter.class,
            description = "Eject a decode whose streams all send nothing for this long while other decodes' streams"
                    + " move (or that then fails a canary request), and end its streams with an error event"
                    + " (decode_stalled); only a canary brings it back (default 5s).")
    Duration stallTimeout = ProxyServer.DEFAULT_STALL_TIMEOUT;

    @Option(names = "--canary-timeout", paramLabel = "DURATION", converter = DurationConverter.class,
            description = "How long a canary request through a decode may take to be answered whole (default 5s).")
    Duration canaryTimeout = ProxyServer.DEFAULT_CANARY_TIMEOUT;

    @Option(names = "--vllm-discovery", paramLabel = "HOST:PORT",
            description = "Also take vLLM MoRIIO instances' registrations, as vLLM's proxy does: a ZeroMQ ROUTER on"
                    + " HOST:PORT (vLLM's default port is 36367) taking their msgpack pings; requests then go to pairs"
                    + " of vLLM instances as vLLM's proxy sends them (default: none).")
    String vllmDiscovery;

    @Option(names = "--vllm-allow", paramLabel = "CIDR[,CIDR...]",
            description = "The networks vLLM registrations are taken from; nothing in them can be authenticated"
                    + " (default ${DEFAULT-VALUE}).")
    String vllmAllow = "127.0.0.0/8,::1/128";

    @Option(names = "--client-header", paramLabel = "NAME",
            description = "Name each request's client by this header (e.g. X-Forwarded-For, set by a gateway in front"
                    + " of the proxy) instead of its API key, else its address; the roles share their KV blocks and"
                    + " prefill between clients (default: API key, else address).")
    String clientHeader;

    @Option(names = "--max-instances-per-role", paramLabel = "N",
            description = "Hold at most N prefill and N decode instances; a new one beyond that is refused until a"
                    + " place frees (default ${DEFAULT-VALUE}).")
    int maxInstancesPerRole = InstanceRegistry.DEFAULT_MAX_PER_ROLE;

    @Override
    public Integer call() {
        OptionChecks.port(spec.commandLine(), "--port", port);
        OptionChecks.port(spec.commandLine(), "--discovery-port", discoveryPort);
        OptionChecks.positive(spec.commandLine(), "--instance-ttl", instanceTtl);
        OptionChecks.positive(spec.commandLine(), "--upstream-timeout", upstreamTimeout);
        OptionChecks.positive(spec.commandLine(), "--first-byte-timeout", firstByteTimeout);
        OptionChecks.positive(spec.commandLine(), "--token-timeout", tokenTimeout);
        OptionChecks.positive(spec.commandLine(), "--stall-timeout", stallTimeout);
        OptionChecks.positive(spec.commandLine(), "--canary-timeout", canaryTimeout);
        if (maxModelLen != null) {
            OptionChecks.inRange(spec.commandLine(), "--max-model-len", maxModelLen, 1, 1 << 24);
        }
        OptionChecks.inRange(spec.commandLine(), "--max-instances-per-role", maxInstancesPerRole, 1,
                InstanceRegistry.MAX_PER_ROLE_LIMIT);
        KvfluxConfig config = configOptions.load(spec.commandLine());
        NotifyAuth secret = NotifySecret.resolve(config, spec.commandLine());
        OptionChecks.secretOffLoopback(spec.commandLine(), "--host", host, secret);
        Optional<EtcdDiscovery> etcd = discoveryOptions.resolve(spec.commandLine(), config, null);
        ProxyServer.Builder settings;
        try {
            settings = ProxyServer.builder().host(host).port(port != null ? port : config.ports().proxy())
                    .discoveryPort(discoveryPort != null ? discoveryPort : config.ports().proxyDiscovery())
                    .registry(new InstanceRegistry(instanceTtl, Schedulers.parallel(), maxInstancesPerRole))
                    .upstreamTimeout(upstreamTimeout).firstByteTimeout(firstByteTimeout).tokenTimeout(tokenTimeout)
                    .stallTimeout(stallTimeout).canaryTimeout(canaryTimeout).firstToken(FirstToken.named(firstToken))
                    .clientKeys(clientHeader == null ? ClientKeys.DEFAULT : ClientKeys.fromHeader(clientHeader))
                    .vllmDiscovery(vllmDiscovery == null ? null : OptionChecks.hostPort(spec.commandLine(),
                            "--vllm-discovery", vllmDiscovery), Networks.parse(vllmAllow))
                    .maxModelLen(maxModelLen != null ? maxModelLen : config.limits().maxModelLen())
                    .maxInFlight(maxInFlight, maxQueued)
                    .meterRegistry(RoleRunner.processMeters()).registrationSecret(secret)
                    .membership(etcd.orElse(null));
        } catch (IllegalArgumentException e) {
            throw new CommandLine.ParameterException(spec.commandLine(), e.getMessage());
        }
        Tracing tracing = tracingOptions.start(config, "kvflux-proxy", spec.commandLine());
        ProxyServer proxy;
        try {
            proxy = settings.observationRegistry(TracingOptions.registry(tracing)).bindNow();
        } catch (IllegalStateException e) {
            RoleRunner.close(tracing);
            return RoleRunner.cannotStart(spec.commandLine(), e);
        }
        return RoleRunner.runUntilStopped(() -> {
            proxy.close();
            RoleRunner.close(tracing);
        });
    }
}
