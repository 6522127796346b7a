package dev.kvflux.tools.cli;

import dev.kvflux.bindings.DescribedEngine;
import dev.kvflux.serving.config.KvfluxConfig;
import dev.kvflux.serving.etcd.EtcdDiscovery;
import dev.kvflux.serving.observe.Tracing;
import dev.kvflux.serving.role.DecodeServer;
import dev.kvflux.serving.role.ServingModel;
import dev.kvflux.transfer.DecodeSide;
import dev.kvflux.transfer.notify.NotifyAuth;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;
import picocli.CommandLine;
import dev.kvflux.transfer.KvMode;

/** {@code kvflux decode}: a simulated decode instance. */
@Command(name = "decode", mixinStandardHelpOptions = true,
        description = {"Runs a simulated decode instance: it registers its KV region with the --backend engine and"
                + " sends prefill its descriptors with each block list, waits for each request's write_done, checks"
                + " the KV (every block's bytes, where the engine holds them), then"
                + " decodes one token per decode step; a write_failed or its receive deadline fails the request"
                + " with a clear error. Registers with the proxy every 3s, or keeps a leased record in etcd"
                + " (--discovery etcd://HOST:PORT)."
                + " Requests and notifications are signed with the cluster's notify secret, from the environment variable KVFLUX_NOTIFY_SECRET (or notify.secret in --config): give the proxy and every role the same one; a role bound to an address other than loopback needs it."})
public final class DecodeCommand implements Callable<Integer> {
    @Spec
    CommandLine.Model.CommandSpec spec;

    @Mixin
    TracingOptions tracingOptions;

    @Mixin
    RoleOptions roleOptions;

    @Mixin
    EngineOptions engineOptions;

    @Option(names = "--receive-deadline", paramLabel = "DURATION", converter = DurationConverter.class,
            description = "How long a request waits for its notice (default: transfer.timeout plus half, at least 5s more).")
    Duration receiveDeadline;

    @Option(names = "--no-receive-deadline",
            description = "Wait for a notice for ever, as vLLM's WRITE mode does (for comparison only).")
    boolean noDeadline;

    @Option(names = "--kv-blocks", paramLabel = "N",
            description = "KV blocks of this instance; a request needing more than are free gets 503 at once (default 65536).")
    int kvBlocks = DecodeServer.DEFAULT_KV_BLOCKS;

    @Option(names = "--block-lease", paramLabel = "DURATION", converter = DurationConverter.class,
            description = "How long an ended request's blocks stay quarantined when prefill never releases them"
                    + " (default: twice transfer.timeout).")
    Duration blockLease;

    @Option(names = "--transfer-timeout", paramLabel = "DURATION", converter = DurationConverter.class,
            description = "READ mode: how long a layer's reads may run before the request fails (default:"
                    + " transfer.timeout).")
    Duration transferTimeout;

    @Option(names = "--inject-fault", paramLabel = "SPEC", hidden = true,
            description = "READ mode fault injection for chaos runs, on the reads decode posts: as prefill's"
                    + " --inject-fault.")
    String injectFault;

    @Override
    public Integer call() {
        OptionChecks.transferTimeout(spec.commandLine(), "--transfer-timeout", transferTimeout);
        OptionChecks.positive(spec.commandLine(), "--receive-deadline", receiveDeadline);
        OptionChecks.positive(spec.commandLine(), "--block-lease", blockLease);
        OptionChecks.inRange(spec.commandLine(), "--kv-blocks", kvBlocks, 1, OptionChecks.MAX_KV_BLOCKS);
        roleOptions.check(spec.commandLine());
        KvfluxConfig config = roleOptions.config(spec.commandLine());
        Duration deadline = noDeadline ? null
                : receiveDeadline != null ? receiveDeadline : DecodeSide.defaultReceiveDeadline(config.transfer().timeout());
        ServingModel model = roleOptions.model(spec.commandLine());
        NotifyAuth auth = NotifySecret.resolve(config, spec.commandLine());
        roleOptions.requireSecretOffLoopback(spec.commandLine(), auth);
        Optional<EtcdDiscovery> etcd = roleOptions.etcd(spec.commandLine(), config);
        String vllmProxy = roleOptions.vllmProxy(spec.commandLine(), etcd.isPresent());
        java.util.function.Predicate<java.net.InetAddress> unsignedFrom = vllmProxy == null ? address -> false
                : roleOptions.vllmAllow(spec.commandLine())::contains;
        engineOptions.check(spec.commandLine(), config);
        KvMode kvMode = engineOptions.kvMode(spec.commandLine(), config);
        EngineOptions.FaultSpec faults = injectFault == null ? null
                : EngineOptions.FaultSpec.parse(injectFault, spec.commandLine());
        List<DescribedEngine> engines;
        try {
            engines = engineOptions.openRanks(config, "decode", faults, false);
        } catch (IllegalStateException e) {
            return RoleRunner.cannotStart(spec.commandLine(), e);
        }
        Tracing tracing = tracingOptions.start(config, "kvflux-decode", spec.commandLine());
        DecodeServer decode;
        try {
            decode = DecodeServer.builder().engines(engines)
                    .tp(engineOptions.tp()).peerTp(engineOptions.peerTp()).gpu(engineOptions.gpu()).kvMode(kvMode)
                    .transferTimeout(transferTimeout != null ? transferTimeout : config.transfer().timeout())
                    .gpuRuntime(engineOptions.runtime().orElse(null))
                    .addresses(roleOptions.addresses(config.ports().decodeHttp(), config.ports().decodeNotify()))
                    .historyLog(roleOptions.historyLog)
                    .model(model).receiveDeadline(deadline).auth(auth).kvBlocks(kvBlocks)
                    .maxModelLen(roleOptions.maxModelLen(config)).maxRequestShare(roleOptions.maxRequestShare(config))
                    .clientShare(roleOptions.clientShare(config)).unsignedFrom(unsignedFrom)
                    .blockLease(blockLease != null ? blockLease : config.transfer().timeout().multipliedBy(2))
                    .limits(config.notifyChannel().limits()).meterRegistry(RoleRunner.processMeters())
                    .observationRegistry(TracingOptions.registry(tracing))
                    .bindNow();
        } catch (IllegalArgumentException e) {
            engines.forEach(DescribedEngine::close);
            RoleRunner.close(tracing);
            throw new CommandLine.ParameterException(spec.commandLine(), e.getMessage());
        } catch (IllegalStateException e) {
            engines.forEach(DescribedEngine::close);
            RoleRunner.close(tracing);
            return RoleRunner.cannotStart(spec.commandLine(), e);
        }
        if (vllmProxy != null) {
            decode.registerWithVllmProxy(vllmProxy, kvMode);
        } else if (etcd.isPresent()) {
            decode.registerIn(etcd.get());
        } else {
            decode.pingProxy(roleOptions.proxyUrl(config), Duration.ofSeconds(3));
        }
        return RoleRunner.runUntilStopped(() -> {
            decode.close();
            engines.forEach(DescribedEngine::close);
            RoleRunner.close(tracing);
        });
    }
}
