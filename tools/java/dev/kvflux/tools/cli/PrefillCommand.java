package dev.kvflux.tools.cli;

import dev.kvflux.bindings.DescribedEngine;
import dev.kvflux.serving.config.KvfluxConfig;
import dev.kvflux.serving.etcd.EtcdDiscovery;
import dev.kvflux.serving.observe.Tracing;
import dev.kvflux.serving.role.Policy;
import dev.kvflux.serving.role.PrefillServer;
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

/** {@code kvflux prefill}: a simulated prefill instance writing KV through the transfer engine {@code --backend} names. */
@Command(name = "prefill", mixinStandardHelpOptions = true,
        description = {"Runs a simulated prefill instance: prompts go through a simulated model, each layer's KV"
                + " is written into decode's KV region through the WRITE pipeline on the --backend engine (the simulated"
                + " xGMI engine by default), and the outcome"
                + " is sent to decode (write_done, or write_failed under the kvflux policy). Registers with the"
                + " proxy every 3s, or keeps a leased record in etcd (--discovery etcd://HOST:PORT)."
                + " Requests and notifications are signed with the cluster's notify secret, from the environment variable KVFLUX_NOTIFY_SECRET (or notify.secret in --config): give the proxy and every role the same one; a role bound to an address other than loopback needs it."})
public final class PrefillCommand implements Callable<Integer> {
    @Spec
    CommandLine.Model.CommandSpec spec;

    @Mixin
    TracingOptions tracingOptions;

    @Mixin
    RoleOptions roleOptions;

    @Mixin
    EngineOptions engineOptions;

    @Option(names = "--policy", paramLabel = "NAME", converter = PolicyConverter.class,
            description = "legacy (vLLM's connector with the whole-timeout wait), sliced (vLLM's sliced-wait fix) or"
                    + " kvflux (default ${DEFAULT-VALUE}).")
    Policy policy = Policy.KVFLUX;

    @Option(names = "--transfer-timeout", paramLabel = "DURATION", converter = DurationConverter.class,
            description = "The completion wait's timeout (default: transfer.timeout).")
    Duration transferTimeout;

    @Option(names = "--sg-under-load",
            description = "Use the scatter/gather copy path, whose copies are seen only after prefill's queued steps.")
    boolean sgUnderLoad;

    @Option(names = "--kv-blocks", paramLabel = "N",
            description = "KV blocks of this instance; a prompt needing more than are free gets 503 at once (default 65536).")
    int kvBlocks = PrefillServer.DEFAULT_KV_BLOCKS;

    @Option(names = "--inject-fault", paramLabel = "SPEC", hidden = true,
            description = "Fault injection for chaos runs: fail:EVERY:CODE (every EVERY-th batch fails with CODE, e.g."
                    + " ERR_RDMA_OP), stall:EVERY (every EVERY-th batch never completes) or slow:EVERY:MILLIS (every"
                    + " EVERY-th batch succeeds MILLIS ms after its copy finished).")
    String injectFault;

    @Override
    public Integer call() {
        OptionChecks.transferTimeout(spec.commandLine(), "--transfer-timeout", transferTimeout);
        OptionChecks.inRange(spec.commandLine(), "--kv-blocks", kvBlocks, 1, OptionChecks.MAX_KV_BLOCKS);
        roleOptions.check(spec.commandLine());
        KvfluxConfig config = roleOptions.config(spec.commandLine());
        Optional<EtcdDiscovery> etcd = roleOptions.etcd(spec.commandLine(), config);
        String vllmProxy = roleOptions.vllmProxy(spec.commandLine(), etcd.isPresent());
        java.util.function.Predicate<java.net.InetAddress> unsignedFrom = vllmProxy == null ? address -> false
                : roleOptions.vllmAllow(spec.commandLine())::contains;
        Duration timeout = transferTimeout != null ? transferTimeout : config.transfer().timeout();
        engineOptions.check(spec.commandLine(), config);
        KvMode kvMode = engineOptions.kvMode(spec.commandLine(), config);
        EngineOptions.FaultSpec faults = injectFault == null ? null
                : EngineOptions.FaultSpec.parse(injectFault, spec.commandLine());
        List<DescribedEngine> engines;
        try {
            engines = engineOptions.openRanks(config, "prefill", faults, sgUnderLoad);
        } catch (IllegalStateException e) {
            return RoleRunner.cannotStart(spec.commandLine(), e);
        }
        ServingModel model = roleOptions.model(spec.commandLine());
        NotifyAuth auth = NotifySecret.resolve(config, spec.commandLine());
        roleOptions.requireSecretOffLoopback(spec.commandLine(), auth);
        Tracing tracing = tracingOptions.start(config, "kvflux-prefill", spec.commandLine());
        PrefillServer prefill;
        try {
            prefill = PrefillServer.builder()
                    .addresses(roleOptions.addresses(config.ports().prefillHttp(), config.ports().prefillNotify()))
                    .historyLog(roleOptions.historyLog)
                    .model(model).policy(policy).engines(engines)
                    .tp(engineOptions.tp()).peerTp(engineOptions.peerTp()).gpu(engineOptions.gpu()).kvMode(kvMode)
                    .gpuRuntime(engineOptions.runtime().orElse(null)).transfer(config.transfer().withTimeout(timeout))
                    .notifyWithin(DecodeSide.defaultReceiveDeadline(timeout)).auth(auth).kvBlocks(kvBlocks)
                    .maxModelLen(roleOptions.maxModelLen(config)).maxRequestShare(roleOptions.maxRequestShare(config))
                    .clientShare(roleOptions.clientShare(config)).unsignedFrom(unsignedFrom)
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
            prefill.registerWithVllmProxy(vllmProxy, kvMode);
        } else if (etcd.isPresent()) {
            prefill.registerIn(etcd.get());
        } else {
            prefill.pingProxy(roleOptions.proxyUrl(config), Duration.ofSeconds(3));
        }
        return RoleRunner.runUntilStopped(() -> {
            prefill.close();
            engines.forEach(DescribedEngine::close);
            RoleRunner.close(tracing);
        });
    }
}
