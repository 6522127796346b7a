package dev.kvflux.serving.role;

import dev.kvflux.bindings.TransferEngine;
import dev.kvflux.bindings.gpu.GpuCopyEngine;
import dev.kvflux.bindings.mori.MoriIoException;
import dev.kvflux.bindings.mori.NativeTransferEngine;
import dev.kvflux.bindings.mori.PushMode;
import dev.kvflux.operators.CompletionWait;
import dev.kvflux.operators.PushWait;
import dev.kvflux.operators.WaitStrategy;
import dev.kvflux.serving.config.KvfluxConfig;
import dev.kvflux.serving.metrics.RoleMetrics;
import dev.kvflux.transfer.LayerReads;
import java.time.Duration;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * How a role's kvflux waits learn that its engine's copies ended, decided once per engine when the role starts.
 * Where the engine can push completion, {@link #pushOn} switches it on and the role waits with {@link PushWait}
 * ({@code reactive-push}): MoRI's library with kvflux's completion hook, the C simulator ({@code native-sim}, the
 * same binding), and the GPU copy engine on a runtime with host functions. Elsewhere (the simulated xGMI engine, a
 * MoRI built without the hook, HIP 5.2) it polls, densely around the copies' predicted end
 * ({@link CompletionWait#adaptive()}, {@code reactive-adaptive}), one learnt copy rate per engine. The role names
 * the wait in its startup line and in the gauge {@value #GAUGE}.
 */
final class WaitChoice {
    private static final Logger LOG = LoggerFactory.getLogger(WaitChoice.class);
    /** Gauge, 1, tagged {@code strategy}: the wait the role's transfers end with. */
    static final String GAUGE = "kvflux.wait.strategy";

    private WaitChoice() {
    }

    /**
     * Whether {@code engine} pushes completion from now on: switched on here where the engine can push, so that its
     * statuses are settled by the engine and a {@link PushWait} needs no poll. Every batch posted afterwards pushes.
     */
    static boolean pushOn(TransferEngine engine) {
        return switch (engine) {
            case NativeTransferEngine mori -> {
                try {
                    mori.engine().push(PushMode.ON);
                    yield true;
                } catch (MoriIoException e) {
                    LOG.warn("the {} engine cannot push completion, so its statuses are polled: {}", mori.backend(),
                            e.getMessage());
                    yield false;
                }
            }
            case GpuCopyEngine gpu when gpu.runtime().supportsHostFunctions() -> {
                gpu.push(true);
                yield true;
            }
            case GpuCopyEngine gpu -> {
                LOG.warn("{} has no host functions, so the {} engine's statuses are polled", gpu.runtime(),
                        gpu.backend());
                yield false;
            }
            default -> false;
        };
    }

    /** Prefill's WRITE wait under the kvflux policy: the configured push wait where the engine pushes, else the polled one. */
    static WaitStrategy write(TransferEngine engine, KvfluxConfig.Transfer transfer) {
        return pushOn(engine) ? transfer.pushWait() : transfer.completionWait().adaptive();
    }

    /** Decode's reads in READ mode: each layer's barrier a draining push wait where the engine pushes, else polled. */
    static LayerReads reads(TransferEngine engine, Duration transferTimeout) {
        return pushOn(engine) ? LayerReads.using(PushWait.drain(transferTimeout))
                : LayerReads.using(CompletionWait.drain(transferTimeout).adaptive());
    }

    /** The waits' strategy names, each once, in rank order: what the startup line says after {@code wait}. */
    static String names(List<? extends WaitStrategy> waits) {
        return String.join(",", strategies(waits));
    }

    /** The gauge {@value #GAUGE}: 1 for each strategy the waits report under, tagged {@code strategy}. */
    static void register(RoleMetrics meters, List<? extends WaitStrategy> waits) {
        for (String strategy : strategies(waits)) {
            meters.gauge(GAUGE, "The wait the role's transfers end with (1), by strategy: under the kvflux policy"
                    + " reactive-push where the engine pushes completion, reactive-adaptive where it is polled", strategy, s -> 1,
                    "strategy", strategy);
        }
    }

    private static List<String> strategies(List<? extends WaitStrategy> waits) {
        return waits.stream().map(WaitStrategy::strategyName).distinct().toList();
    }
}
