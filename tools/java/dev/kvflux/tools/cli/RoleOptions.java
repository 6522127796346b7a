package dev.kvflux.tools.cli;

import dev.kvflux.serving.config.KvfluxConfig;
import dev.kvflux.serving.etcd.EtcdDiscovery;
import dev.kvflux.serving.role.RoleAddresses;
import dev.kvflux.serving.role.ServingModel;
import java.time.Duration;
import java.util.Optional;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;
import picocli.CommandLine;

/**
 * Everything a simulated prefill or decode instance is told alike ({@code @Mixin RoleOptions}): its
 * configuration and logging ({@link ConfigOptions}), its simulated model ({@link ModelOptions}), where it
 * listens and where it registers: a proxy's discovery port, or etcd ({@link DiscoveryOptions}).
 */
public final class RoleOptions {
    @Mixin
    ConfigOptions configOptions;

    @Mixin
    ModelOptions modelOptions;

    @Option(names = "--host", description = "Address to bind and advertise (default ${DEFAULT-VALUE}).")
    String host = "127.0.0.1";

    @Option(names = "--http-port", paramLabel = "PORT", description = "HTTP port (default: the configuration's).")
    Integer httpPort;

    @Option(names = "--notify-port", paramLabel = "PORT", description = "Notify port (default: the configuration's).")
    Integer notifyPort;

    @Option(names = "--max-model-len", paramLabel = "TOKENS",
            description = "The longest request, prompt and max_tokens together; longer ones get 400 (default:"
                    + " limits.max-model-len, 32768).")
    Integer maxModelLen;

    @Option(names = "--max-request-share", paramLabel = "SHARE",
            description = "The largest share of this instance's KV blocks one request may hold, more than 0 and at"
                    + " most 1; larger requests get 400 (default: limits.max-request-share, 0.25).")
    Double maxRequestShare;

    @Option(names = "--client-share", paramLabel = "SHARE",
            description = "The largest share of this instance's KV blocks (and, on prefill, of its queue and of a step"
                    + " while others wait) one client may hold, more than 0 and at most 1; a client is its API key,"
                    + " else its address, as the proxy names it; beyond it 429 client_over_share. 1 turns it off"
                    + " (default: limits.client-share, 0.5).")
    Double clientShare;

    @Option(names = "--proxy", paramLabel = "URL",
            description = "The proxy's discovery URL (default http://127.0.0.1:<ports.proxy-discovery>); not with"
                    + " --discovery etcd://.")
    String proxy;

    @Mixin
    DiscoveryOptions discoveryOptions;

    @Option(names = "--vllm-proxy", paramLabel = "HOST:PORT",
            description = "Register with vLLM's MoRIIO proxy (or kvflux proxy --vllm-discovery) at its ZeroMQ"
                    + " discovery port, as vLLM's connector does, and take its requests in vLLM's shape, unsigned,"
                    + " from --vllm-allow networks; the KV still moves by kvflux's own notifications (not with"
                    + " --proxy or --discovery).")
    String vllmProxy;

    @Option(names = "--vllm-allow", paramLabel = "CIDR[,CIDR...]",
            description = "With --vllm-proxy: the networks unsigned requests are taken from (default"
                    + " ${DEFAULT-VALUE}).")
    String vllmAllow = "127.0.0.0/8,::1/128";

    @Option(names = "--lease-ttl", paramLabel = "DURATION", converter = DurationConverter.class,
            description = "With etcd: how long this instance's record outlives its last keep-alive, kept alive every"
                    + " third of it (whole seconds; default: discovery.lease-ttl, 10s).")
    Duration leaseTtl;

    @Option(names = "--history-log", paramLabel = "FILE",
            description = "Append every transfer's history to FILE, one JSON line per event (opened, the messages sent,"
                    + " taken and dropped with their incarnations, the writes into decode's blocks, the ends, the"
                    + " blocks freed), for kvflux chaos's history checker; written off the request path (default:"
                    + " none).")
    java.nio.file.Path historyLog;

    /** As {@link ConfigOptions#load}: applies {@code --logback}, then loads the configuration. */
    KvfluxConfig config(CommandLine cmd) {
        return configOptions.load(cmd);
    }

    /** As {@link ModelOptions#model}: the simulated model, or a {@link CommandLine.ParameterException}. */
    ServingModel model(CommandLine cmd) {
        return modelOptions.model(cmd);
    }

    /** Checks the ports, the model length and the proxy URL given, before anything starts. */
    void check(CommandLine cmd) {
        OptionChecks.port(cmd, "--http-port", httpPort);
        OptionChecks.port(cmd, "--notify-port", notifyPort);
        OptionChecks.httpUrl(cmd, "--proxy", proxy);
        if (maxModelLen != null) {
            OptionChecks.inRange(cmd, "--max-model-len", maxModelLen, 1, 1 << 24);
        }
        if (clientShare != null && !(clientShare > 0 && clientShare <= 1)) {
            throw new CommandLine.ParameterException(cmd, "--client-share must be more than 0 and at most 1, got "
                    + clientShare);
        }
        if (maxRequestShare != null && !(maxRequestShare > 0 && maxRequestShare <= 1)) {
            throw new CommandLine.ParameterException(cmd, "--max-request-share must be more than 0 and at most 1, got "
                    + maxRequestShare);
        }
    }

    /** The largest share of blocks per request: {@code --max-request-share}, else the configuration's. */
    double maxRequestShare(KvfluxConfig config) {
        return maxRequestShare != null ? maxRequestShare : config.limits().maxRequestShare();
    }

    /** A client's largest share: {@code --client-share}, else the configuration's. */
    double clientShare(KvfluxConfig config) {
        return clientShare != null ? clientShare : config.limits().clientShare();
    }

    /** The model length: {@code --max-model-len}, else the configuration's. */
    int maxModelLen(KvfluxConfig config) {
        return maxModelLen != null ? maxModelLen : config.limits().maxModelLen();
    }

    /**
     * Refuses to serve a non-loopback address without a notify secret: anyone who reached the role could then make
     * it queue, allocate and connect where it is told.
     */
    void requireSecretOffLoopback(CommandLine cmd, Object auth) {
        OptionChecks.secretOffLoopback(cmd, "--host", host, auth);
    }

    /** The addresses, with the given configured ports where none was given. */
    RoleAddresses addresses(int configuredHttp, int configuredNotify) {
        return new RoleAddresses(host, httpPort != null ? httpPort : configuredHttp,
                notifyPort != null ? notifyPort : configuredNotify);
    }

    /**
     * Where the instance registers: etcd (with {@code --lease-ttl}), or empty for the proxy's discovery port.
     *
     * @throws CommandLine.ParameterException one line, for a bad value, or both {@code --proxy} and etcd
     */
    Optional<EtcdDiscovery> etcd(CommandLine cmd, KvfluxConfig config) {
        if (leaseTtl != null) {
            try {
                EtcdDiscovery.checkLeaseTtl(leaseTtl);
            } catch (IllegalArgumentException e) {
                throw new CommandLine.ParameterException(cmd, "--lease-ttl: " + e.getMessage());
            }
        }
        Optional<EtcdDiscovery> etcd = discoveryOptions.resolve(cmd, config, leaseTtl);
        if (etcd.isPresent() && proxy != null) {
            throw new CommandLine.ParameterException(cmd, "--proxy registers with a proxy's discovery port and"
                    + " --discovery (or discovery.etcd) in etcd; give one of them");
        }
        if (etcd.isEmpty() && leaseTtl != null) {
            throw new CommandLine.ParameterException(cmd, "--lease-ttl is the lease of a record in etcd; give"
                    + " --discovery etcd://HOST:PORT too (or discovery.etcd)");
        }
        return etcd;
    }

    /**
     * Where to register as vLLM's instances do ({@code --vllm-proxy}), checked; null when not given.
     *
     * @throws CommandLine.ParameterException one line, for a bad value or one given with {@code --proxy} or etcd
     */
    String vllmProxy(CommandLine cmd, boolean etcd) {
        if (vllmProxy == null) {
            return null;
        }
        OptionChecks.hostPort(cmd, "--vllm-proxy", vllmProxy);
        if (proxy != null || etcd) {
            throw new CommandLine.ParameterException(cmd, "--vllm-proxy registers with vLLM's proxy, --proxy with"
                    + " kvflux's and --discovery in etcd; give one of them");
        }
        return vllmProxy;
    }

    /** The networks unsigned requests are taken from, with {@code --vllm-proxy}. */
    dev.kvflux.serving.vllm.Networks vllmAllow(CommandLine cmd) {
        try {
            return dev.kvflux.serving.vllm.Networks.parse(vllmAllow);
        } catch (IllegalArgumentException e) {
            throw new CommandLine.ParameterException(cmd, "--vllm-allow: " + e.getMessage());
        }
    }

    String proxyUrl(KvfluxConfig config) {
        return proxy != null ? proxy : "http://127.0.0.1:" + config.ports().proxyDiscovery();
    }
}
