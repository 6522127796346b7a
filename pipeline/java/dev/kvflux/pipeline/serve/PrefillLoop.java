package dev.kvflux.pipeline.serve;

import dev.kvflux.bindings.sim.SimulatedXgmiEngine;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.core.scheduler.Scheduler;

/**
 * The simulated prefill engine: one step at a time, each taking prompts in arrival order up to the
 * model's token budget (chunked prefill: a prompt larger than what is left is split across steps) and
 * lasting {@code tokens / prefill rate}. Each step is announced to the transfer engine
 * ({@link SimulatedXgmiEngine#prefillStepQueued}), so on the scatter/gather path copies that finish
 * while prefill keeps the GPU busy are seen only after it. A prompt's last step calls its
 * {@code onLastStep} with the step's length when the step starts (its layers' KV is produced during the
 * step) and completes its {@code Mono} when the step ends.
 *
 * <p>All state is confined to one worker of the given scheduler.
 */
final class PrefillLoop implements AutoCloseable {
    private final ServingModel model;
    private final SimulatedXgmiEngine engine;
    private final Scheduler.Worker worker;
    private final ArrayDeque<Job> queue = new ArrayDeque<>();
    private boolean running;
    private long steps;

    PrefillLoop(ServingModel model, SimulatedXgmiEngine engine, Scheduler scheduler) {
        this.model = model;
        this.engine = engine;
        this.worker = scheduler.createWorker();
    }

    /**
     * Queues a prompt of {@code tokens} tokens.
     *
     * @return a {@code Mono} that completes when the prompt's last prefill step ends
     */
    Mono<Void> submit(int tokens, Consumer<Duration> onLastStep) {
        Sinks.Empty<Void> done = Sinks.empty();
        worker.schedule(() -> {
            queue.add(new Job(tokens, onLastStep, done));
            if (!running) {
                step();
            }
        });
        return done.asMono();
    }

    /** How many steps have run. */
    long steps() {
        return steps;
    }

    private void step() {
        int budget = model.maxBatchedTokens();
        int batch = 0;
        List<Job> finishing = new ArrayList<>();
        while (!queue.isEmpty() && budget > 0) {
            Job job = queue.peek();
            int take = Math.min(job.remaining, budget);
            job.remaining -= take;
            budget -= take;
            batch += take;
            if (job.remaining == 0) {
                finishing.add(queue.poll());
            }
        }
        if (batch == 0) {
            running = false;
            return;
        }
        running = true;
        steps++;
        Duration length = model.stepTime(batch);
        engine.prefillStepQueued(length);
        for (Job job : finishing) {
            job.onLastStep.accept(length);
        }
        worker.schedule(() -> {
            for (Job job : finishing) {
                job.done.tryEmitEmpty();
            }
            step();
        }, length.toNanos(), TimeUnit.NANOSECONDS);
    }

    @Override
    public void close() {
        worker.dispose();
    }

    private static final class Job {
        int remaining;
        final Consumer<Duration> onLastStep;
        final Sinks.Empty<Void> done;

        Job(int tokens, Consumer<Duration> onLastStep, Sinks.Empty<Void> done) {
            this.remaining = tokens;
            this.onLastStep = onLastStep;
            this.done = done;
        }
    }
}
