package dev.kvflux.tools.cli;

import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.sim.CopyPath;
import dev.kvflux.bindings.sim.Fault;
import dev.kvflux.bindings.sim.SimulatedXgmiEngine;
import dev.kvflux.serving.config.KvfluxConfig;
import dev.kvflux.serving.observe.Tracing;
import dev.kvflux.serving.role.Policy;
import dev.kvflux.serving.role.PrefillServer;
import dev.kvflux.serving.role.ServingModel;
import dev.kvflux.transfer.DecodeSide;
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

/** {@code kvflux prefill}: a simulated prefill instance writing KV through the simulated xGMI engine. */
@Command(name = "prefill", mixinStandardHelpOptions = true,
        description = {"Runs a simulated prefill instance: prompts go through a simulated model, each layer's KV"
                + " is written to decode through the WRITE pipeline on the simulated xGMI engine, and the outcome"
                + " is sent to decode (write_done, or write_failed under the kvflux policy). Registers with the"
                + " proxy every 3s, or keeps a leased record in etcd (--discovery etcd://HOST:PORT)."})
public final class PrefillCommand implements Callable<Integer> {
    @Spec
    CommandLine.Model.CommandSpec spec;

    @Mixin
    TracingOptions tracingOptions;

    @Mixin
    RoleOptions roleOptions;

    @Option(names = "--policy", paramLabel = "NAME", converter = PolicyConverter.class,
            description = "legacy (vLLM's connector with the whole-timeout wait), seed (vLLM's sliced-wait fix) or"
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

    /** The simulated engine's faults for {@code --inject-fault}, on the first 1,000,000 batches. */
    private static void injectFaults(SimulatedXgmiEngine.Builder engine, String spec, CommandLine cmd) {
        String[] parts = spec.split(":");
        try {
            long every = Long.parseLong(parts[1]);
            if (every < 1) {
                throw new NumberFormatException("must be at least 1");
            }
            for (long ordinal = every - 1; ordinal < 1_000_000; ordinal += every) {
                engine.fault(switch (parts[0]) {
                    case "fail" -> Fault.fail(ordinal, Duration.ofMillis(1), StatusCode.valueOf(parts[2]),
                            "injected failure (chaos)");
                    case "stall" -> Fault.stall(ordinal);
                    case "slow" -> Fault.slow(ordinal, Duration.ofMillis(Long.parseLong(parts[2])));
                    default -> throw new IllegalArgumentException("unknown fault kind " + parts[0]);
                });
            }
        } catch (RuntimeException e) {
            throw new CommandLine.ParameterException(cmd, "--inject-fault '" + spec + "' is not fail:EVERY:CODE,"
                    + " stall:EVERY or slow:EVERY:MILLIS (" + e.getMessage() + ")");
        }
    }

    @Override
    public Integer call() {
        OptionChecks.transferTimeout(spec.commandLine(), "--transfer-timeout", transferTimeout);
        OptionChecks.inRange(spec.commandLine(), "--kv-blocks", kvBlocks, 1, OptionChecks.MAX_KV_BLOCKS);
        roleOptions.check(spec.commandLine());
        KvfluxConfig config = roleOptions.config(spec.commandLine());
        Optional<EtcdDiscovery> etcd = roleOptions.etcd(spec.commandLine(), config);
        Duration timeout = transferTimeout != null ? transferTimeout : config.transfer().timeout();
        SimulatedXgmiEngine.Builder engineBuilder = SimulatedXgmiEngine.builder().timing(config.engine().sim().timing())
                .copyPath(sgUnderLoad ? CopyPath.SCATTER_GATHER : config.engine().sim().copyPath());
        if (injectFault != null) {
            injectFaults(engineBuilder, injectFault, spec.commandLine());
        }
        SimulatedXgmiEngine engine = engineBuilder.build();
        ServingModel model = roleOptions.model(spec.commandLine());
        NotifyAuth auth = NotifySecret.resolve(config, spec.commandLine());
        roleOptions.requireSecretOffLoopback(spec.commandLine(), auth);
        Tracing tracing = tracingOptions.start(config, "kvflux-prefill", spec.commandLine());
        PrefillServer prefill;
        try {
            prefill = PrefillServer.builder()
                    .addresses(roleOptions.addresses(config.ports().prefillHttp(), config.ports().prefillNotify()))
                    .model(model).policy(policy).engine(engine).transfer(config.transfer().withTimeout(timeout))
                    .notifyWithin(DecodeSide.defaultReceiveDeadline(timeout)).auth(auth).kvBlocks(kvBlocks)
                    .maxModelLen(roleOptions.maxModelLen(config)).maxRequestShare(roleOptions.maxRequestShare(config))
                    .limits(config.notifyChannel().limits()).meterRegistry(RoleRunner.processMeters())
                    .observationRegistry(TracingOptions.registry(tracing))
                    .bindNow();
        } catch (IllegalArgumentException e) {
            engine.close();
            RoleRunner.close(tracing);
            throw new CommandLine.ParameterException(spec.commandLine(), e.getMessage());
        } catch (IllegalStateException e) {
            engine.close();
            RoleRunner.close(tracing);
            return RoleRunner.cannotStart(spec.commandLine(), e);
        }
        if (etcd.isPresent()) {
            prefill.registerIn(etcd.get());
        } else {
            prefill.pingProxy(roleOptions.proxyUrl(config), Duration.ofSeconds(3));
        }
        return RoleRunner.runUntilStopped(() -> {
            prefill.close();
            engine.close();
            RoleRunner.close(tracing);
        });
    }
}
