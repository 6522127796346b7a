package dev.kvflux.serving.config;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvflux.bindings.PushedStatus;
import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.sim.CopyPath;
import dev.kvflux.operators.FailMode;
import dev.kvflux.operators.TransferException;
import dev.kvflux.transfer.notify.NotifyLimits;
import io.vavr.collection.Seq;
import io.vavr.control.Validation;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import reactor.core.publisher.Mono;
import reactor.test.StepVerifier;

class KvfluxConfigTest {
    @TempDir
    Path dir;

    private Path file(String yaml) throws IOException {
        return Files.writeString(dir.resolve("kvflux.yaml"), yaml);
    }

    @Test
    void theDefaultsLoadFromTheClasspath() {
        KvfluxConfig config = KvfluxConfig.defaults();

        assertThat(config.transfer().timeout()).isEqualTo(Duration.ofSeconds(30));
        assertThat(config.transfer().slice()).isEqualTo(Duration.ofMillis(10));
        assertThat(config.transfer().failMode()).isEqualTo(FailMode.FAIL_FAST);
        assertThat(config.engine().backend()).isEqualTo("sim-xgmi");
        assertThat(config.engine().sim().perBlockOverhead()).isEqualTo(Duration.ofNanos(12_500));
        assertThat(config.ports().proxy()).isEqualTo(11350);
    }

    @Test
    void theDefaultPortsDoNotCollideWhenBothRolesRunTheLargestTensorParallelSizeOnOneHost() {
        KvfluxConfig.Ports ports = KvfluxConfig.defaults().ports();
        // a role of --tp N listens for notifications on its notify port + R for rank R
        java.util.Map<Integer, String> taken = new java.util.HashMap<>();
        for (var fixed : java.util.Map.of("proxy", ports.proxy(), "proxy-discovery", ports.proxyDiscovery(),
                "prefill-http", ports.prefillHttp(), "decode-http", ports.decodeHttp()).entrySet()) {
            assertThat(taken.put(fixed.getValue(), fixed.getKey())).as("port " + fixed.getValue()).isNull();
        }
        for (int rank = 0; rank < dev.kvflux.transfer.TpRanks.MAX_TP; rank++) {
            assertThat(taken.put(ports.prefillNotify() + rank, "prefill rank " + rank))
                    .as("prefill rank " + rank + "'s notify port " + (ports.prefillNotify() + rank)).isNull();
            assertThat(taken.put(ports.decodeNotify() + rank, "decode rank " + rank))
                    .as("decode rank " + rank + "'s notify port " + (ports.decodeNotify() + rank)).isNull();
        }
    }

    @Test
    void aUserFileOverridesTheDefaultsKeyByKey() throws IOException {
        Validation<Seq<String>, KvfluxConfig> config = KvfluxConfig.load(Optional.of(file("""
                transfer:
                  timeout: 3
                engine:
                  sim:
                    copy-path: scatter-gather
                """)));

        assertThat(config.isValid()).as(config.toString()).isTrue();
        assertThat(config.get().transfer().timeout()).isEqualTo(Duration.ofSeconds(3));
        assertThat(config.get().transfer().slice()).isEqualTo(Duration.ofMillis(10));
        assertThat(config.get().engine().sim().copyPath()).isEqualTo(CopyPath.SCATTER_GATHER);
    }

    @Test
    void kvModeIsWriteByDefaultReadWhenSetAndAnythingElseIsAnErrorNamingTheKey() throws IOException {
        assertThat(KvfluxConfig.defaults().engine().kvMode()).isEqualTo(dev.kvflux.transfer.KvMode.WRITE);

        Validation<Seq<String>, KvfluxConfig> read = KvfluxConfig.load(Optional.of(file("""
                kv:
                  mode: READ
                """)));
        Validation<Seq<String>, KvfluxConfig> bad = KvfluxConfig.load(Optional.of(file("""
                kv:
                  mode: pull
                """)));

        assertThat(read.isValid()).as(read.toString()).isTrue();
        assertThat(read.get().engine().kvMode()).isEqualTo(dev.kvflux.transfer.KvMode.READ);
        assertThat(bad.isInvalid()).isTrue();
        assertThat(bad.getError().mkString("; ")).contains("kv.mode").contains("'pull'").contains("write")
                .contains("read");
    }

    @Test
    void stallDetectionIsOffByDefaultAndAppliesToTheCompletionWaitWhenSet() throws IOException {
        assertThat(KvfluxConfig.defaults().transfer().stallAfter()).isEmpty();
        assertThat(KvfluxConfig.defaults().transfer().completionWait().toString()).doesNotContain("stall");

        Validation<Seq<String>, KvfluxConfig> config = KvfluxConfig.load(Optional.of(file("""
                transfer:
                  stall-after: 5s
                """)));

        assertThat(config.isValid()).as(config.toString()).isTrue();
        assertThat(config.get().transfer().stallAfter()).contains(Duration.ofSeconds(5));
        assertThat(config.get().transfer().completionWait().toString()).contains("stall after 5s");
    }

    @Test
    void thePushWaitSignalsOnTheSchedulerUnlessPushSignalSaysPushThread() throws IOException {
        assertThat(KvfluxConfig.defaults().transfer().pushWait().signalsOnPush()).isFalse();

        KvfluxConfig.Transfer transfer = KvfluxConfig.load(Optional.of(file("""
                transfer:
                  push-signal: push-thread
                  stall-after: 5s
                """))).get().transfer();
        assertThat(transfer.pushWait().signalsOnPush()).isTrue();
        assertThat(transfer.pushWait().toString()).contains("stall after 5s");
        assertThat(transfer.withTimeout(Duration.ofSeconds(3)).signalOnPush()).as("kept with another timeout").isTrue();

        Validation<Seq<String>, KvfluxConfig> wrong = KvfluxConfig.load(Optional.of(file("""
                transfer:
                  push-signal: inline
                """)));
        assertThat(wrong.isInvalid()).isTrue();
        assertThat(wrong.getError().mkString()).contains("transfer.push-signal", "'inline' is not a push signal; use"
                + " scheduler or push-thread");
    }

    @Test
    void theConfiguredPushWaitTakesTheFailModeAndStallsAtTheConfiguredStallTime() throws IOException {
        assertThat(KvfluxConfig.defaults().transfer().pushWait().toString()).doesNotContain("stall");

        KvfluxConfig.Transfer transfer = KvfluxConfig.load(Optional.of(file("""
                transfer:
                  fail-mode: drain
                  stall-after: 5s
                """))).get().transfer();

        assertThat(transfer.pushWait().mode()).isEqualTo(FailMode.DRAIN);
        StepVerifier.withVirtualTime(() -> transfer.pushWait().await(List.of(new NeverPushed())))
                .expectSubscription()
                .expectNoEvent(Duration.ofMillis(4999))
                .thenAwait(Duration.ofMillis(1))
                .expectErrorSatisfies(e -> assertThat(((TransferException) e).kind())
                        .isEqualTo(TransferException.Kind.STALLED))
                .verify();
    }

    /** A status that stays in flight and never pushes. */
    private static final class NeverPushed implements PushedStatus {
        @Override
        public Mono<StatusCode> pushed() {
            return Mono.never();
        }

        @Override
        public StatusCode code() {
            return StatusCode.IN_PROGRESS;
        }

        @Override
        public String message() {
            return "";
        }
    }

    @Test
    void aStallTimeOutsideTheSliceAndTheTimeoutIsRefused() throws IOException {
        Validation<Seq<String>, KvfluxConfig> config = KvfluxConfig.load(Optional.of(file("""
                transfer:
                  timeout: 3s
                  stall-after: 10s
                """)));

        assertThat(config.isInvalid()).isTrue();
        assertThat(config.getError().toJavaList()).singleElement().asString()
                .startsWith("transfer.stall-after (10s) must lie between transfer.slice (10ms) and transfer.timeout (3s)");
    }

    @Test
    void validationReportsEveryBadKeyAtOnce() throws IOException {
        Validation<Seq<String>, KvfluxConfig> config = KvfluxConfig.load(Optional.of(file("""
                transfer:
                  timeout: soon
                  fail-mode: sometimes
                  max-in-flight: 0
                engine:
                  sim:
                    bandwidth-gbps: -3
                ports:
                  decode-http: 70000
                  notfy: 1
                """)));

        assertThat(config.isInvalid()).isTrue();
        assertThat(config.getError().toJavaList()).hasSize(6).satisfiesExactlyInAnyOrder(
                e -> assertThat(e).startsWith("transfer.timeout: 'soon' is not a duration"),
                e -> assertThat(e).startsWith("transfer.fail-mode: 'sometimes' is not a fail mode"),
                e -> assertThat(e).startsWith("transfer.max-in-flight: must be between 1 and"),
                e -> assertThat(e).startsWith("engine.sim.bandwidth-gbps: must be a positive number"),
                e -> assertThat(e).startsWith("ports.decode-http: must be between 1 and 65535, got 70000"),
                e -> assertThat(e).startsWith("unknown key ports.notfy; known keys are"));
    }

    @Test
    void tracingIsOffByDefaultAndExportsToAConfiguredOtlpEndpoint() throws IOException {
        assertThat(KvfluxConfig.defaults().tracing()).isEqualTo(KvfluxConfig.TraceExport.OFF);

        KvfluxConfig config = KvfluxConfig.load(Optional.of(file("""
                tracing:
                  otlp-endpoint: http://collector:4318/v1/traces
                  sample-probability: 0.25
                """))).get();

        assertThat(config.tracing().otlpEndpoint()).contains(java.net.URI.create("http://collector:4318/v1/traces"));
        assertThat(config.tracing().sampleProbability()).isEqualTo(0.25);
    }

    @Test
    void aBadTracingEndpointOrProbabilityIsOneLineEachNamingTheKey() throws IOException {
        Validation<Seq<String>, KvfluxConfig> config = KvfluxConfig.load(Optional.of(file("""
                tracing:
                  otlp-endpoint: collector:4318
                  sample-probability: 2
                """)));

        assertThat(config.isInvalid()).isTrue();
        assertThat(config.getError()).hasSize(2).allSatisfy(line -> assertThat(line).doesNotContain("\n"));
        assertThat(config.getError().get(0)).startsWith("tracing.otlp-endpoint: 'collector:4318' is not an http or"
                + " https URL with a host");
        assertThat(config.getError().get(1)).isEqualTo("tracing.sample-probability: must be from 0 to 1 (1 keeps"
                + " every trace), got 2");
    }

    @Test
    void membershipIsTheBuiltInRegistryByDefaultAndEtcdWhenConfigured() throws IOException {
        assertThat(KvfluxConfig.defaults().discovery().etcd()).isEmpty();

        KvfluxConfig config = KvfluxConfig.load(Optional.of(file("""
                discovery:
                  etcd: etcd://10.0.0.1:2379,10.0.0.2:2379
                  cluster: prod
                  lease-ttl: 6s
                """))).get();

        assertThat(config.discovery().etcd()).hasValueSatisfying(etcd -> {
            assertThat(etcd.url()).isEqualTo("etcd://10.0.0.1:2379,10.0.0.2:2379");
            assertThat(etcd.cluster()).isEqualTo("prod");
            assertThat(etcd.leaseTtl()).isEqualTo(Duration.ofSeconds(6));
        });
    }

    @Test
    void aBadDiscoveryKeyIsOneLineEachNamingTheKey() throws IOException {
        Validation<Seq<String>, KvfluxConfig> bad = KvfluxConfig.load(Optional.of(file("""
                discovery:
                  etcd: http://10.0.0.1:2379
                  cluster: a/b
                  lease-ttl: 500ms
                """)));

        assertThat(bad.getError().toJavaList()).hasSize(3).satisfiesExactlyInAnyOrder(
                e -> assertThat(e).startsWith("discovery.etcd: 'http://10.0.0.1:2379' is not an etcd URL"),
                e -> assertThat(e).startsWith("discovery.cluster: cluster name 'a/b' must be 1 to 64"),
                e -> assertThat(e).startsWith("discovery.lease-ttl: the lease TTL must be whole seconds"));
    }

    @Test
    void notifyLimitsDefaultAndOverrideKeyByKeyAndAreCheckedAtOnce() throws IOException {
        assertThat(KvfluxConfig.defaults().notifyChannel().limits()).isEqualTo(NotifyLimits.DEFAULTS);

        KvfluxConfig config = KvfluxConfig.load(Optional.of(file("""
                notify:
                  max-connections: 64
                  idle-timeout: 30s
                  peer-budget-mib: 4
                  bulk-mib-per-second: 8
                """))).get();
        assertThat(config.notifyChannel().limits()).isEqualTo(new NotifyLimits(64,
                NotifyLimits.DEFAULTS.frameReadTimeout(), Duration.ofSeconds(30), 4L << 20, 8L << 20));

        Validation<Seq<String>, KvfluxConfig> bad = KvfluxConfig.load(Optional.of(file("""
                notify:
                  max-connections: 0
                  frame-read-timeout: 0s
                  peer-budget-mib: lots
                  bulk-mib-per-second: 0
                """)));
        assertThat(bad.getError().toJavaList()).hasSize(4).satisfiesExactlyInAnyOrder(
                e -> assertThat(e).startsWith("notify.max-connections: must be between 1 and 1048576, got 0"),
                e -> assertThat(e).startsWith("notify.frame-read-timeout: must be greater than zero"),
                e -> assertThat(e).startsWith("notify.peer-budget-mib: 'lots' is not a whole number"),
                e -> assertThat(e).startsWith("notify.bulk-mib-per-second: must be between 1 and 65536, got 0"));
    }

    @Test
    void aMissingFileIsReportedByItsPath() {
        Path missing = dir.resolve("nope.yaml");

        assertThat(KvfluxConfig.load(Optional.of(missing)).getError().head())
                .isEqualTo("configuration file " + missing + " does not exist or cannot be read");
    }

    @Test
    void durationsAcceptUnitsAndBareSeconds() {
        assertThat(Durations.parse("3s")).isEqualTo(Duration.ofSeconds(3));
        assertThat(Durations.parse("500ms")).isEqualTo(Duration.ofMillis(500));
        assertThat(Durations.parse("30")).isEqualTo(Duration.ofSeconds(30));
        assertThat(Durations.parse("0.5")).isEqualTo(Duration.ofMillis(500));
        assertThat(Durations.parse("12.5us")).isEqualTo(Duration.ofNanos(12_500));
        assertThat(Durations.format(Duration.ofNanos(12_500))).isEqualTo("12.5us");
        assertThatThrownBy(() -> Durations.parse("3 parsecs")).hasMessageContaining("like 30s, 500ms");
    }

    private java.util.List<String> problems(Path path) {
        Validation<Seq<String>, KvfluxConfig> config = KvfluxConfig.load(Optional.of(path));
        assertThat(config.isInvalid()).as(config.toString()).isTrue();
        return config.getError().toJavaList();
    }

    @Test
    void aFileWhoseTopLevelIsAListIsAnErrorNamingTheFile() throws IOException {
        Path path = file("- transfer\n- timeout\n");

        assertThat(problems(path)).singleElement().asString()
                .isEqualTo("configuration file " + path + " holds a list at its top level; it must be a map of keys,"
                        + " such as transfer: with timeout: 30s under it");
    }

    @Test
    void aDuplicateKeyIsAnErrorNamingTheFileTheKeyAndTheLine() throws IOException {
        Path path = file("transfer:\n  timeout: 3s\ntransfer:\n  slice: 5ms\n");
        java.util.logging.Logger root = java.util.logging.Logger.getLogger("");
        java.util.List<java.util.logging.LogRecord> jul = new java.util.concurrent.CopyOnWriteArrayList<>();
        java.util.logging.Handler capture = new java.util.logging.Handler() {
            @Override
            public void publish(java.util.logging.LogRecord record) {
                jul.add(record);
            }

            @Override
            public void flush() {
            }

            @Override
            public void close() {
            }
        };
        root.addHandler(capture);
        try {
            assertThat(problems(path)).singleElement().asString()
                    .startsWith("configuration file " + path + " holds a duplicate key transfer (line 3")
                    .endsWith("give each key once");
        } finally {
            root.removeHandler(capture);
        }
        assertThat(jul).as("no raw java.util.logging warning").isEmpty();
    }

    @Test
    void aFileOverTheSizeLimitIsRefusedBeforeItIsParsed() throws IOException {
        Path path = Files.writeString(dir.resolve("big.yaml"), "# " + "x".repeat(KvfluxConfig.MAX_FILE_BYTES) + "\n");
        long start = System.nanoTime();

        assertThat(problems(path)).singleElement().asString()
                .isEqualTo("configuration file " + path + " is over the 1 MiB limit of a configuration file; give only"
                        + " the keys you change");
        assertThat(Duration.ofNanos(System.nanoTime() - start)).isLessThan(Duration.ofSeconds(5));
    }

    @Test
    void anAliasBombIsRefusedAsInvalidYaml() throws IOException {
        Path path = file("""
                a: &a ["x", "x", "x", "x", "x", "x", "x", "x", "x"]
                b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
                c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
                d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
                """);

        assertThat(problems(path)).singleElement().asString()
                .startsWith("configuration file " + path + " is not valid YAML: ").doesNotContain("\n");
    }

    @Test
    void anEmptyFileChangesNothing() throws IOException {
        Validation<Seq<String>, KvfluxConfig> config = KvfluxConfig.load(Optional.of(file("")));

        assertThat(config.isValid()).as(config.toString()).isTrue();
        assertThat(config.get()).isEqualTo(KvfluxConfig.defaults());
    }
}
