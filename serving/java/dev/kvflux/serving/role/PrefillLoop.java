package dev.kvflux.serving.role;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.core.scheduler.Scheduler;

/**
 * The simulated prefill engine: steps run back to back, each taking prompts in arrival order up to the
 * model's token budget (chunked prefill: a prompt larger than what is left is split across steps) and
 * lasting {@code tokens / prefill rate}.
 *
 * <p>As vLLM's scheduler prepares and launches the next batch while the GPU still runs the current one,
 * the next step is formed and queued {@link #DEFAULT_LAUNCH_AHEAD} before the current one ends (at once
 * when the engine is idle). Each step is announced to the transfer engine when it is queued
 * ({@link StepListener}; the simulated engine's {@code prefillStepQueued}), so on the scatter/gather path a copy that finishes
 * while steps keep coming is seen only once prefill pauses. A prompt's last step calls its
 * {@link LastStep} when the step is queued, with the time until the step starts and its length (the
 * prompt's layers produce their KV during the step); its {@code Mono} completes when the step ends.
 *
 * <p>At most {@code maxQueued} prompts wait for their last step at once; {@link #submit} refuses more
 * with a {@link QueueFullException}, so an overloaded prefill pushes back instead of queueing without bound.
 *
 * <p>All state is confined to one worker of the given scheduler; time is that scheduler's clock.
 */
final class PrefillLoop implements AutoCloseable {
    /** How long before the running step ends the next one is queued. */
    static final Duration DEFAULT_LAUNCH_AHEAD = Duration.ofMillis(5);
    /** How many prompts may wait for their last step by default: far more than any client keeps open. */
    static final int DEFAULT_MAX_QUEUED = 1024;

    /** The queue holds {@code maxQueued} prompts; the prompt was not queued. */
    static final class QueueFullException extends RuntimeException {
        QueueFullException(int maxQueued) {
            super("prefill is overloaded: " + maxQueued + " prompts already wait for a prefill step, its limit;"
                    + " retry later, lower the request rate or concurrency, or add prefill instances", null, false,
                    false);
        }
    }

    /** Called when a prompt's last step is queued. */
    interface LastStep {
        void queued(Duration startsIn, Duration length);
    }

    /**
     * Hears of every step when it is queued, with its length: the simulated engine does
     * ({@code SimulatedXgmiEngine::prefillStepQueued}), so that its copies contend with the forward pass; an
     * engine over real GPUs needs nothing ({@link #NONE}).
     */
    @FunctionalInterface
    interface StepListener {
        StepListener NONE = length -> { };

        void queued(Duration length);
    }

    private final ServingModel model;
    private final StepListener listener;
    private final Scheduler scheduler;
    private final Scheduler.Worker worker;
    private final long launchAheadNanos;
    private final int maxQueued;
    /** Prompts submitted whose last step is not yet formed; updated from any thread. */
    private final AtomicInteger waiting = new AtomicInteger();
    private final ArrayDeque<Job> queue = new ArrayDeque<>();
    private long busyUntil = Long.MIN_VALUE;
    private boolean planned;
    private long steps;

    PrefillLoop(ServingModel model, StepListener steps, Scheduler scheduler) {
        this(model, steps, scheduler, DEFAULT_LAUNCH_AHEAD, DEFAULT_MAX_QUEUED);
    }

    /**
     * @throws IllegalArgumentException if {@code maxQueued} is not positive
     */
    PrefillLoop(ServingModel model, StepListener steps, Scheduler scheduler, Duration launchAhead,
            int maxQueued) {
        if (maxQueued < 1) {
            throw new IllegalArgumentException("the prefill queue must hold at least 1 prompt, got " + maxQueued);
        }
        this.maxQueued = maxQueued;
        this.model = model;
        this.listener = steps;
        this.scheduler = scheduler;
        this.worker = scheduler.createWorker();
        this.launchAheadNanos = launchAhead.toNanos();
    }

    /**
     * Queues a prompt of {@code tokens} tokens.
     *
     * @return a {@code Mono} that completes when the prompt's last prefill step ends. Cancelling it
     *     before the prompt's last step is formed takes the prompt out of the queue (on the loop's worker),
     *     so no later step spends time on it and its place in the bound is given back; once the last step
     *     is formed, cancelling only stops the signal
     * @throws QueueFullException at once, queueing nothing, if {@code maxQueued} prompts already wait for
     *     their last step
     */
    Mono<Void> submit(int tokens, LastStep onLastStep) {
        if (waiting.incrementAndGet() > maxQueued) {
            waiting.decrementAndGet();
            throw new QueueFullException(maxQueued);
        }
        Sinks.Empty<Void> done = Sinks.empty();
        Job job = new Job(tokens, onLastStep, done);
        worker.schedule(() -> {
            if (!job.cancelled) {
                queue.add(job);
                planSoon();
            }
        });
        return done.asMono().doOnCancel(() -> {
            try {
                worker.schedule(() -> cancel(job));
            } catch (java.util.concurrent.RejectedExecutionException closed) {
                // the loop is closed: nothing runs any more
            }
        });
    }

    /** How many prompts wait for their last step (submitted, not cancelled, last step not yet formed). */
    int waiting() {
        return waiting.get();
    }

    /** Takes a prompt out of the queue if its last step is not formed yet; on the worker. */
    private void cancel(Job job) {
        if (job.cancelled || job.formed) {
            return;
        }
        job.cancelled = true;
        queue.remove(job);
        waiting.decrementAndGet();
    }

    /** How many steps have been queued. */
    long steps() {
        return steps;
    }

    /** Plans the next step for when it should be queued: now if idle, else just before the running step ends. */
    private void planSoon() {
        if (planned) {
            return;
        }
        planned = true;
        long delay = busyUntil == Long.MIN_VALUE ? 0 : Math.max(0, busyUntil - launchAheadNanos - now());
        worker.schedule(this::plan, delay, TimeUnit.NANOSECONDS);
    }

    private void plan() {
        planned = false;
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
                Job formed = queue.poll();
                formed.formed = true;
                finishing.add(formed);
                waiting.decrementAndGet();
            }
        }
        if (batch == 0) {
            return;
        }
        long now = now();
        long start = Math.max(now, busyUntil);
        Duration length = model.stepTime(batch);
        listener.queued(length);
        busyUntil = start + length.toNanos();
        steps++;
        for (Job job : finishing) {
            // one prompt's failing callback must not strand the others of its step: it fails that prompt alone
            try {
                job.onLastStep.queued(Duration.ofNanos(start - now), length);
            } catch (RuntimeException e) {
                job.done.tryEmitError(e);
            }
        }
        worker.schedule(() -> finishing.forEach(job -> job.done.tryEmitEmpty()), busyUntil - now,
                TimeUnit.NANOSECONDS);
        if (!queue.isEmpty()) {
            planSoon();
        }
    }

    private long now() {
        return scheduler.now(TimeUnit.NANOSECONDS);
    }

    @Override
    public void close() {
        worker.dispose();
    }

    private static final class Job {
        int remaining;
        boolean cancelled;
        boolean formed;
        final LastStep onLastStep;
        final Sinks.Empty<Void> done;

        Job(int tokens, LastStep onLastStep, Sinks.Empty<Void> done) {
            this.remaining = tokens;
            this.onLastStep = onLastStep;
            this.done = done;
        }
    }
}
