package dev.kvflux.examples.start;

import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.sim.Fault;
import dev.kvflux.micrometer.MicrometerWaitRecorder;
import dev.kvflux.operators.CompletionWait;
import dev.kvflux.operators.TransferException;
import dev.kvflux.pipeline.ReadBarrier;
import dev.kvflux.pipeline.WriteOutcome;
import dev.kvflux.pipeline.WritePipeline;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import reactor.core.publisher.Flux;
import reactor.core.scheduler.Schedulers;

/**
 * Runs the README's flows on the simulated engine in real time and prints what each ended with: a WRITE by hand, a
 * READ with a drain barrier, the same WRITE with one copy failing, and two requests through the WRITE pipeline with
 * its meters.
 */
public final class GettingStarted {
    private static final int LAYERS = 8;
    private static final int BLOCKS = 16;
    private static final long BLOCK_BYTES = 64 * 1024;
    private static final Duration LAYER_TIME = Duration.ofMillis(5);

    private GettingStarted() {
    }

    public static void main(String[] args) {
        CompletionWait wait = CompletionWait.failFast(Duration.ofSeconds(30));

        try (KvSetup kv = KvSetup.simulated(Schedulers.parallel(), LAYERS, BLOCKS, BLOCK_BYTES, LAYER_TIME, null)) {
            long start = System.nanoTime();
            Flows.write(kv, wait).block();
            System.out.printf("write: %d layers written in %.1f ms%n", LAYERS, (System.nanoTime() - start) / 1e6);
        }

        try (KvSetup kv = KvSetup.simulated(Schedulers.parallel(), LAYERS, BLOCKS, BLOCK_BYTES, LAYER_TIME, null)) {
            var layers = Flows.read(kv, ReadBarrier.of(Duration.ofSeconds(30))).collectList().block();
            System.out.println("read: layers ready for attention in order " + layers);
        }

        Fault third = Fault.fail(2, Duration.ofMillis(1), StatusCode.ERR_RDMA_OP, "link down");
        try (KvSetup kv = KvSetup.simulated(Schedulers.parallel(), LAYERS, BLOCKS, BLOCK_BYTES, LAYER_TIME, third)) {
            Flows.write(kv, wait).block();
        } catch (TransferException e) {
            System.out.println("write with a failing copy: " + e.kind() + " " + e.code() + ", " + e.getMessage());
        }

        MeterRegistry registry = new SimpleMeterRegistry();
        WritePipeline pipeline = WritePipeline.builder()
                .waitStrategy(wait)
                .maxInFlight(64)
                .recorder(MicrometerWaitRecorder.of(registry, Tags.of("role", "prefill")))
                .build();
        try (KvSetup a = KvSetup.simulated(Schedulers.parallel(), LAYERS, BLOCKS, BLOCK_BYTES, LAYER_TIME, null);
             KvSetup b = KvSetup.simulated(Schedulers.parallel(), LAYERS, BLOCKS, BLOCK_BYTES, LAYER_TIME, third)) {
            for (WriteOutcome outcome : Flux.merge(Flows.pipelined(pipeline, "request-a", a),
                    Flows.pipelined(pipeline, "request-b", b)).collectList().block()) {
                System.out.println("pipeline: " + describe(outcome));
            }
        }
        System.out.println("meters: kvflux.wait.duration count " + (long) registry.get("kvflux.wait.duration")
                .timers().stream().mapToLong(t -> t.count()).sum());
    }

    /** One line for an outcome: the switch over the sealed type needs no default. */
    static String describe(WriteOutcome outcome) {
        return switch (outcome) {
            case WriteOutcome.WriteDone done -> done.transferId() + " write_done";
            case WriteOutcome.WriteFailed failed -> failed.transferId() + " write_failed " + failed.code() + ": "
                    + failed.reason();
        };
    }
}
