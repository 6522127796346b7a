package dev.kvflux.tools.repro;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvflux.bindings.BatchPlan;
import dev.kvflux.bindings.EventState;
import dev.kvflux.bindings.LayerEvent;
import dev.kvflux.bindings.MemoryRegion;
import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.TransferEngine;
import dev.kvflux.bindings.TransferSession;
import dev.kvflux.bindings.TransferStatus;
import dev.kvflux.bindings.sim.CopyTiming;
import dev.kvflux.bindings.sim.SimulatedXgmiEngine;
import dev.kvflux.tools.cli.KvfluxCli;
import dev.kvflux.serving.config.KvfluxConfig;
import dev.kvflux.testing.RecordingEngine;
import dev.kvflux.testing.ScriptedStatus;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;
import reactor.test.scheduler.VirtualTimeScheduler;

class ReproRunTest {
    private static final ReproGeometry SMALL = new ReproGeometry(3, 4, 4096);
    private static final ReproSettings TWO_SECONDS = new ReproSettings(Duration.ofSeconds(2), Duration.ofMillis(10),
            KvfluxConfig.defaults());

    /** Copies that finish at once, and two extra figures per wait. */
    private static final class InstantBackend implements ReproBackend {
        @Override
        public String name() {
            return "instant";
        }

        @Override
        public ReproTarget open(ReproGeometry g, ReproSettings settings) {
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

    /** A target over an instant one, for the tests that change one of its hooks. */
    private abstract static class OverInstant implements ReproTarget {
        private final ReproTarget instant;

        OverInstant(ReproGeometry g) {
            instant = new InstantBackend().open(g);
        }

        @Override
        public TransferEngine engine() {
            return instant.engine();
        }

        @Override
        public TransferSession session() {
            return instant.session();
        }

        @Override
        public void close() {
            instant.close();
        }
    }

    @Test
    void theJsonReportHasOneEntryPerStrategyWithTheTargetsExtraFiguresAggregated() {
        ReproSettings settings = TWO_SECONDS;

        ReproRun.Result result = ReproRun.run(new InstantBackend(), SMALL, settings,
                List.of(new ReproRun.Plan("sliced-native", 3), new ReproRun.Plan("reactive", 3)), new ReproRun.Progress() { });
        String json = ReproReport.json(result);

        assertThat(json).startsWith("{\"backend\":\"instant\",\"transfer_timeout_s\":2,\"slice_s\":0.01,\"strategies\":[");
        assertThat(json).contains("{\"strategy\":\"sliced-native\",\"waits\":3,\"warmup_requests\":0,\"median_s\":")
                .contains("{\"strategy\":\"reactive\",\"waits\":3,\"warmup_requests\":0,\"median_s\":")
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
        assertThat(err.toString()).contains("unknown wait strategy 'psychic'; known strategies: native, sliced-native, poll-1ms, reactive");
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
            public ReproTarget open(ReproGeometry g, ReproSettings settings) {
                return new OverInstant(g) {
                    @Override
                    public LayerEvent layerEvent(int request, int layer) {
                        return layer == 1 ? () -> EventState.NOT_READY : () -> EventState.READY;
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

    /** A target on the recording engine, whose every batch's status {@code status} makes on the virtual clock. */
    private static ReproBackend scripted(RecordingEngine engine, Supplier<TransferStatus> status) {
        return new ReproBackend() {
            @Override
            public String name() {
                return "scripted";
            }

            @Override
            public ReproTarget open(ReproGeometry g, ReproSettings settings) {
                TransferSession session = new TransferSession() {
                    @Override
                    public long allocateTransferUid() {
                        return 1;
                    }

                    @Override
                    public TransferStatus batchWrite(BatchPlan plan, long transferUid) {
                        return status.get();
                    }

                    @Override
                    public TransferStatus batchRead(BatchPlan plan, long transferUid) {
                        throw new UnsupportedOperationException();
                    }

                    @Override
                    public MemoryRegion local() {
                        return new MemoryRegion("p", 0, g.regionBytes(), 0);
                    }

                    @Override
                    public MemoryRegion remote() {
                        return new MemoryRegion("d", 0, g.regionBytes(), 1);
                    }
                };
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
                    public void close() {
                    }
                };
            }
        };
    }

    private static ReproRun.Wait onlyWait(ReproBackend backend, String strategy) {
        ReproSettings settings = new ReproSettings(Duration.ofSeconds(30), Duration.ofMillis(10), KvfluxConfig.defaults());
        return ReproRun.run(backend, SMALL, settings, List.of(new ReproRun.Plan(strategy, 1)), new ReproRun.Progress() { })
                .strategies().getFirst().waits().getFirst();
    }

    @Test
    void theWholeTimeoutWaitMakesOneWaitAllWithTheWholeTimeoutAndRecordsItsTimeoutMessage() {
        VirtualTimeScheduler clock = VirtualTimeScheduler.create();
        RecordingEngine engine = new RecordingEngine(clock);

        ReproRun.Wait wait = onlyWait(scripted(engine, () -> ScriptedStatus.never(clock)), "native");

        assertThat(wait.error()).isEqualTo("MoRIIO batch wait failed (StatusCode.IN_PROGRESS): RDMA transfer timed out"
                + " after 30s");
        assertThat(wait.succeeded()).isZero();
        assertThat(engine.timeouts).containsExactly(30_000L);
    }

    @Test
    void theSlicedNativeWaitWaitsInTenMillisecondSlicesUntilTheStatusesSucceed() {
        VirtualTimeScheduler clock = VirtualTimeScheduler.create();
        RecordingEngine engine = new RecordingEngine(clock);

        ReproRun.Wait wait = onlyWait(scripted(engine, () -> ScriptedStatus.succeedsAt(clock, Duration.ofMillis(25))),
                "sliced-native");

        assertThat(wait.failed()).isFalse();
        assertThat(wait.succeeded()).isEqualTo(SMALL.layers());
        assertThat(engine.timeouts).containsExactly(10L, 10L, 10L);
    }

    @Test
    void aFailedBatchIsRecordedWithItsCodeAndMessage() {
        VirtualTimeScheduler clock = VirtualTimeScheduler.create();
        RecordingEngine engine = new RecordingEngine(clock);

        ReproRun.Wait wait = onlyWait(scripted(engine, () -> ScriptedStatus.failsAt(clock, Duration.ZERO,
                StatusCode.ERR_GPU_OP, "copy failed")), "sliced-native");

        assertThat(wait.error()).isEqualTo("MoRIIO batch wait failed (StatusCode.ERR_GPU_OP): copy failed");
    }

    /** The instant backend with warm-ups, a setup, and a record of what it was told and what it posted. */
    private static final class WarmingBackend implements ReproBackend {
        final List<String> told = new java.util.ArrayList<>();
        final long mismatchedAtFirstRequest;
        int requests;

        WarmingBackend(long mismatchedAtFirstRequest) {
            this.mismatchedAtFirstRequest = mismatchedAtFirstRequest;
        }

        @Override
        public String name() {
            return "warming";
        }

        @Override
        public ReproTarget open(ReproGeometry g, ReproSettings settings) {
            return new OverInstant(g) {
                @Override
                public List<ReproStrategy> warmUp() {
                    return List.of(ReproStrategy.REACTIVE, ReproStrategy.REACTIVE_PUSH);
                }

                @Override
                public void startStrategy(ReproStrategy strategy) {
                    told.add(strategy.label());
                }

                @Override
                public Map<String, Object> setup() {
                    Map<String, Object> setup = new java.util.LinkedHashMap<>();
                    setup.put("copy_path", "default");
                    setup.put("streams", 64);
                    return setup;
                }

                @Override
                public Map<String, Object> afterWait(int request) {
                    return Map.of(ReproTarget.MISMATCHED_BYTES, requests++ == 0 ? mismatchedAtFirstRequest : 0L);
                }
            };
        }
    }

    @Test
    void theTargetsWarmUpRequestsGoFirstUncountedAndEachStrategyIsAnnouncedBeforeItsRequests() {
        WarmingBackend backend = new WarmingBackend(0);
        ReproSettings settings = TWO_SECONDS;
        List<String> waited = new java.util.concurrent.CopyOnWriteArrayList<>();

        ReproRun.Result result = ReproRun.run(backend, SMALL, settings, List.of(new ReproRun.Plan("sliced-native", 2)),
                new ReproRun.Progress() {
                    @Override
                    public void waited(String strategy, int request, int requests, ReproRun.Wait wait) {
                        waited.add(strategy);
                    }
                });

        assertThat(backend.told).containsExactly("reactive", "reactive-push", "sliced-native");
        assertThat(waited).containsExactly("warm-up reactive", "warm-up reactive-push", "sliced-native", "sliced-native");
        assertThat(result.strategies()).singleElement().satisfies(s -> assertThat(s.waits()).hasSize(2));
    }

    @Test
    void aTargetsSetupIsPrintedUnderTheTablesHeaderAndInTheJson() {
        ReproSettings settings = TWO_SECONDS;

        ReproRun.Result result = ReproRun.run(new WarmingBackend(0), SMALL, settings,
                List.of(new ReproRun.Plan("reactive", 1)), new ReproRun.Progress() { });

        assertThat(ReproReport.table(result).lines().skip(1).findFirst()).hasValue("setup: copy_path default, streams 64");
        assertThat(ReproReport.json(result)).contains("\"slice_s\":0.01,\"setup\":{\"copy_path\":\"default\","
                + "\"streams\":64},\"strategies\"");
    }

    @Test
    void aWarmUpRequestWithMismatchedBytesStopsTheRunBeforeAnythingIsTimed() {
        ReproSettings settings = TWO_SECONDS;

        assertThatThrownBy(() -> ReproRun.run(new WarmingBackend(7), SMALL, settings,
                List.of(new ReproRun.Plan("reactive", 3)), new ReproRun.Progress() { }))
                .isInstanceOf(IllegalStateException.class)
                .hasMessage("the reactive warm-up request failed (3 of 3 statuses succeeded, 7 mismatched bytes);"
                        + " not timing anything");
    }

    @Test
    void wholeNumbersArePrintedWithoutAnExponent() {
        ReproSettings settings = new ReproSettings(Duration.ofSeconds(30), Duration.ofMillis(10), KvfluxConfig.defaults());
        ReproBackend large = new ReproBackend() {
            @Override
            public String name() {
                return "large";
            }

            @Override
            public ReproTarget open(ReproGeometry g, ReproSettings s) {
                return new OverInstant(g) {
                    @Override
                    public Map<String, Object> afterWait(int request) {
                        return Map.of("verified_bytes", 989_855_700L);
                    }
                };
            }
        };

        ReproRun.Result result = ReproRun.run(large, SMALL, settings, List.of(new ReproRun.Plan("reactive", 1)),
                new ReproRun.Progress() { });

        assertThat(ReproReport.json(result)).contains("\"transfer_timeout_s\":30,")
                .contains("\"verified_bytes\":{\"median\":989855700,\"min\":989855700,\"max\":989855700}");
        assertThat(ReproReport.table(result)).contains("989855700 (989855700 / 989855700)");
    }

    @Test
    void aTargetWithoutASetupPrintsNoSetupLine() {
        ReproSettings settings = TWO_SECONDS;

        ReproRun.Result result = ReproRun.run(new InstantBackend(), SMALL, settings,
                List.of(new ReproRun.Plan("reactive", 1)), new ReproRun.Progress() { });

        assertThat(ReproReport.table(result)).doesNotContain("setup");
        assertThat(ReproReport.json(result)).doesNotContain("setup");
    }

    @Test
    void theLagComesFromTheTargetOrTheStatusesAndOnlyAKnownLagGetsTheRowAndTheJsonFields() {
        ReproBackend measuring = new ReproBackend() {
            private int waits;

            @Override
            public String name() {
                return "measuring";
            }

            @Override
            public ReproTarget open(ReproGeometry g, ReproSettings s) {
                return new OverInstant(g) {
                    @Override
                    public Map<String, Object> afterWait(int request) {
                        return Map.of(DETECTION_LAG_MS, List.of(0.25, 0.75, 4.0).get(waits++));
                    }
                };
            }
        };

        ReproRun.Result lagged = ReproRun.run(measuring, SMALL, TWO_SECONDS, List.of(new ReproRun.Plan("reactive", 3)),
                new ReproRun.Progress() { });
        ReproRun.Result fromStatuses = ReproRun.run(new InstantBackend(), SMALL, TWO_SECONDS,
                List.of(new ReproRun.Plan("reactive", 1)), new ReproRun.Progress() { });
        ReproRun.Result blind = new ReproRun.Result("blind", SMALL, TWO_SECONDS, List.of(new ReproRun.StrategyResult(
                "reactive", List.of(new ReproRun.Wait(0.1, 3, 3, null, Map.of())))), Map.of());

        assertThat(lagged.strategies().getFirst().lagP50Ms()).isEqualTo(0.75);
        assertThat(ReproReport.json(lagged)).contains("\"lag_p50_ms\":0.75,\"lag_p99_ms\":4,\"lag_max_ms\":4,");
        assertThat(ReproReport.table(lagged)).containsPattern("lag p50 / max \\(ms\\) +0\\.750 / 4\\.000");
        ReproRun.Wait simulated = fromStatuses.strategies().getFirst().waits().getFirst();
        assertThat(simulated.hasLag()).as("the simulated engine's statuses know when their copies ended").isTrue();
        assertThat(simulated.lagMs()).isNotNegative();
        assertThat(ReproReport.json(blind)).doesNotContain("lag_p50_ms").doesNotContain("lag_p99_ms");
        assertThat(ReproReport.table(blind)).doesNotContain("lag p50");
    }

    @Test
    void aPlansUntimedRequestsGoFirstOnItsOwnStrategyTheTargetToldAndOnlyTheTimedOnesAreReported() {
        List<String> seen = new java.util.ArrayList<>();
        ReproBackend counting = backend("counting", g -> new OverInstant(g) {
            private String strategy;

            @Override
            public void startStrategy(ReproStrategy started) {
                strategy = started.label();
            }

            private boolean untimed;

            @Override
            public void warmingUp(boolean on) {
                untimed = on;
            }

            @Override
            public Map<String, Object> afterWait(int request) {
                seen.add(strategy + " " + request + (untimed ? " untimed" : ""));
                return Map.of();
            }
        });

        ReproRun.Result result = ReproRun.run(counting, SMALL, TWO_SECONDS, List.of(
                new ReproRun.Plan("reactive", 2, 3), new ReproRun.Plan("reactive-push", 1)),
                new ReproRun.Progress() { });

        assertThat(seen).containsExactly("reactive 0 untimed", "reactive 1 untimed", "reactive 2 untimed", "reactive 0",
                "reactive 1", "reactive-push 0");
        assertThat(result.strategies()).extracting(ReproRun.StrategyResult::warmUp).containsExactly(3, 0);
        assertThat(result.strategies().getFirst().waits()).hasSize(2);
        assertThat(ReproReport.json(result)).contains("\"strategy\":\"reactive\",\"waits\":2,\"warmup_requests\":3,");
        assertThatThrownBy(() -> new ReproRun.Plan("reactive", 1, -1)).isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void aTargetTimingTheLagItselfIsGivenTheWaitsEndNotTheTimeItIsCalled() {
        // Clock readings compared for their order only (never a duration): the last layer comes before the wait's end,
        // and the end before the run's bookkeeping after the wait, which asks the target for its copy-end grace.
        long[] lastLayer = new long[1];
        long[] bookkeeping = new long[1];
        long[] given = new long[1];
        ReproBackend timing = backend("timing", g -> new OverInstant(g) {
            @Override
            public LayerEvent layerEvent(int request, int layer) {
                lastLayer[0] = System.nanoTime();
                return () -> EventState.READY;
            }

            @Override
            public Duration copyEndGrace() {
                bookkeeping[0] = System.nanoTime();
                return Duration.ZERO;
            }

            @Override
            public Map<String, Object> afterWait(int request, long waitEndedNanos) {
                given[0] = waitEndedNanos;
                return Map.of(DETECTION_LAG_MS, 0.5);
            }
        });

        ReproRun.Wait wait = ReproRun.run(timing, SMALL, TWO_SECONDS, List.of(new ReproRun.Plan("reactive", 1)),
                new ReproRun.Progress() { }).strategies().getFirst().waits().getFirst();

        assertThat(given[0]).as("the end given is the wait's, after its last layer")
                .isGreaterThanOrEqualTo(lastLayer[0])
                .as("and before the run's bookkeeping, not when the target is called")
                .isLessThanOrEqualTo(bookkeeping[0]);
        assertThat(wait.lagMs()).isEqualTo(0.5);
    }

    /** A backend named {@code name} whose targets {@code open} makes. */
    private static ReproBackend backend(String name, java.util.function.Function<ReproGeometry, ReproTarget> open) {
        return new ReproBackend() {
            @Override
            public String name() {
                return name;
            }

            @Override
            public ReproTarget open(ReproGeometry g, ReproSettings s) {
                return open.apply(g);
            }
        };
    }
}
