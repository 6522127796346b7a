package dev.kvflux.tools.repro;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvflux.bindings.EventState;
import dev.kvflux.bindings.LayerEvent;
import dev.kvflux.bindings.TransferEngine;
import dev.kvflux.bindings.TransferSession;
import dev.kvflux.bindings.sim.CopyTiming;
import dev.kvflux.bindings.sim.SimulatedXgmiEngine;
import dev.kvflux.tools.cli.KvfluxCli;
import dev.kvflux.serving.config.KvfluxConfig;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

class ReproRunTest {
    private static final ReproGeometry SMALL = new ReproGeometry(3, 4, 4096);

    /** Copies that finish at once, and two extra figures per wait. */
    private static final class InstantBackend implements ReproBackend {
        @Override
        public String name() {
            return "instant";
        }

        @Override
        public ReproTarget open(ReproGeometry g) {
            SimulatedXgmiEngine engine = SimulatedXgmiEngine.builder()
                    .timing(new CopyTiming(Duration.ZERO, Duration.ZERO, Duration.ZERO, 1e15)).build();
            TransferSession session = engine.createSession(engine.registerMemory(g.regionBytes(), 0),
                    engine.registerMemory(g.regionBytes(), 1));
            return new ReproTarget() {
                @Override
                public TransferEngine engine() {
                    return engine;
                }

                @Override
                public TransferSession session() {
                    return session;
                }

                @Override
                public Map<String, Object> afterWait(int request) {
                    return Map.of("copy_s", 0.1 * (request + 1), "bytes_verified", "yes");
                }

                @Override
                public void close() {
                    engine.close();
                }
            };
        }
    }

    @Test
    void theJsonReportHasOneEntryPerStrategyWithTheTargetsExtraFiguresAggregated() {
        ReproSettings settings = new ReproSettings(Duration.ofSeconds(2), Duration.ofMillis(10), KvfluxConfig.defaults());

        ReproRun.Result result = ReproRun.run(new InstantBackend(), SMALL, settings,
                List.of(new ReproRun.Plan("sliced-native", 3), new ReproRun.Plan("reactive", 3)), new ReproRun.Progress() { });
        String json = ReproReport.json(result);

        assertThat(json).startsWith("{\"backend\":\"instant\",\"transfer_timeout_s\":2,\"slice_s\":0.01,\"strategies\":[");
        assertThat(json).contains("{\"strategy\":\"sliced-native\",\"waits\":3,\"median_s\":")
                .contains("{\"strategy\":\"reactive\",\"waits\":3,\"median_s\":")
                .contains("\"statuses_succeeded\":9,\"statuses_total\":9,\"failed_waits\":0")
                .contains("\"copy_s\":{\"median\":0.2,\"min\":0.1,\"max\":0.3}")
                .contains("\"bytes_verified\":[\"yes\"]");
        assertThat(ReproReport.table(result)).contains("copy s, median (min / max)", "3 of 3 in every wait");
    }

    @Test
    void anUnknownStrategyIsRefusedNamingTheKnownOnes() {
        StringWriter err = new StringWriter();
        CommandLine cli = new CommandLine(new KvfluxCli()).setErr(new PrintWriter(err));

        int code = cli.execute("repro", "--wait", "native,psychic");

        assertThat(code).isEqualTo(2);
        assertThat(err.toString()).contains("unknown wait strategy 'psychic'; known strategies: native, sliced-native, reactive");
    }

    @Test
    void badTimeoutsAndSlicesAreRefusedAsBadOptionsBeforeAnyBackendOpens() {
        StringWriter err = new StringWriter();
        CommandLine cli = new CommandLine(new KvfluxCli()).setErr(new PrintWriter(err));

        assertThat(cli.execute("repro", "--transfer-timeout", "25h")).isEqualTo(2);
        assertThat(cli.execute("repro", "--wait", "sliced-native", "--slice", "500us")).isEqualTo(2);

        assertThat(err.toString()).contains("--transfer-timeout must be at most 24h, got 25h")
                .contains("--slice must be at least 1ms for sliced-native")
                .doesNotContain("failed:");
    }

    @Test
    void aLayerEventThatNeverTurnsReadyEndsTheRunAtTheTransferTimeoutNamingTheLayer() {
        ReproBackend stuck = new ReproBackend() {
            @Override
            public String name() {
                return "stuck";
            }

            @Override
            public ReproTarget open(ReproGeometry g) {
                ReproTarget instant = new InstantBackend().open(g);
                return new ReproTarget() {
                    @Override
                    public TransferEngine engine() {
                        return instant.engine();
                    }

                    @Override
                    public TransferSession session() {
                        return instant.session();
                    }

                    @Override
                    public LayerEvent layerEvent(int request, int layer) {
                        return layer == 1 ? () -> EventState.NOT_READY : () -> EventState.READY;
                    }

                    @Override
                    public void close() {
                        instant.close();
                    }
                };
            }
        };
        ReproSettings settings = new ReproSettings(Duration.ofMillis(200), Duration.ofMillis(10), KvfluxConfig.defaults());

        assertThatThrownBy(() -> ReproRun.run(stuck, SMALL, settings, List.of(new ReproRun.Plan("reactive", 1)),
                new ReproRun.Progress() { }))
                .isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("layer 1's event of reactive request 0 was not ready after 200ms");
    }
}
