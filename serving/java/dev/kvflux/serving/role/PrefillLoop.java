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
 * <p>Prompts are queued per client (the key the proxy names a request's client by; one queue for requests that name
 * none), and a step takes them by deficit round-robin: each client in turn is given a quantum of tokens, one eighth
 * of a step, and its prompts take from it in arrival order, so one client's long prompts cannot keep another's short
 * one waiting behind them. One client may have at most {@code clientShare} of {@code maxQueued} prompts waiting
 * ({@link ClientOverShareException} beyond that), and while another client has had prompts in the last second, one
 * client's prompts fill at most {@code clientShare} of a step, so the steps a waiting prompt sits behind stay short.
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

    /** The prompt's client already has its share of the queue waiting; the prompt was not queued. */
    static final class ClientOverShareException extends RuntimeException {
        ClientOverShareException(int perClient, int maxQueued) {
            super("this client already has " + perClient + " prompts waiting for a prefill step, its share of the "
                    + maxQueued + " this prefill queues (--client-share); retry when some have been prefilled, or send"
                    + " fewer at once", null, false, false);
        }
    }

    /** How long a client counts as active after its last prompt was queued or formed. */
    static final Duration RECENT = Duration.ofSeconds(1);

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
    private final double clientShare;
    private final int maxQueuedPerClient;
    /** Prompts submitted whose last step is not yet formed; updated from any thread. */
    private final AtomicInteger waiting = new AtomicInteger();
    /** The same per client that names itself; updated from any thread. */
    private final java.util.concurrent.ConcurrentHashMap<String, AtomicInteger> waitingPerClient =
            new java.util.concurrent.ConcurrentHashMap<>();
    /** Each client's prompts, in arrival order; on the worker. */
    private final java.util.Map<String, ArrayDeque<Job>> queues = new java.util.HashMap<>();
    /** The clients with prompts queued, in their round-robin order; on the worker. */
    private final ArrayDeque<String> turns = new ArrayDeque<>();
    /** Each queued client's tokens granted and not yet used; on the worker. */
    private final java.util.Map<String, Long> deficits = new java.util.HashMap<>();
    /** When each client last had a prompt queued or formed (the scheduler's clock); on the worker. */
    private final java.util.Map<String, Long> lastActive = new java.util.HashMap<>();
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
        this(model, steps, scheduler, launchAhead, maxQueued, 1.0);
    }

    /**
     * @throws IllegalArgumentException if {@code maxQueued} is not positive or {@code clientShare} not in (0, 1]
     */
    PrefillLoop(ServingModel model, StepListener steps, Scheduler scheduler, Duration launchAhead,
            int maxQueued, double clientShare) {
        if (maxQueued < 1) {
            throw new IllegalArgumentException("the prefill queue must hold at least 1 prompt, got " + maxQueued);
        }
        if (!(clientShare > 0 && clientShare <= 1)) {
            throw new IllegalArgumentException("a client's share of the prefill queue must be more than 0 and at most"
                    + " 1, got " + clientShare);
        }
        this.maxQueued = maxQueued;
        this.clientShare = clientShare;
        this.maxQueuedPerClient = Math.max(1, (int) Math.floor(maxQueued * clientShare));
        this.model = model;
        this.listener = steps;
        this.scheduler = scheduler;
        this.worker = scheduler.createWorker();
        this.launchAheadNanos = launchAhead.toNanos();
    }

    /** As {@link #submit(String, int, LastStep)} for a prompt that names no client. */
    Mono<Void> submit(int tokens, LastStep onLastStep) {
        return submit("", tokens, onLastStep);
    }

    /**
     * Queues a prompt of {@code tokens} tokens for {@code client} (empty: one that names none).
     *
     * @return a {@code Mono} that completes when the prompt's last prefill step ends. Cancelling it
     *     before the prompt's last step is formed takes the prompt out of the queue (on the loop's worker),
     *     so no later step spends time on it and its place in the bound is given back; once the last step
     *     is formed, cancelling only stops the signal
     * @throws QueueFullException at once, queueing nothing, if {@code maxQueued} prompts already wait for
     *     their last step
     * @throws ClientOverShareException at once, queueing nothing, if the client already has its share of them waiting
     */
    Mono<Void> submit(String client, int tokens, LastStep onLastStep) {
        AtomicInteger mine = null;
        if (!client.isEmpty() && clientShare < 1) {
            mine = waitingPerClient.computeIfAbsent(client, c -> new AtomicInteger());
            if (mine.incrementAndGet() > maxQueuedPerClient) {
                release(client, mine);
                throw new ClientOverShareException(maxQueuedPerClient, maxQueued);
            }
        }
        if (waiting.incrementAndGet() > maxQueued) {
            waiting.decrementAndGet();
            if (mine != null) {
                release(client, mine);
            }
            throw new QueueFullException(maxQueued);
        }
        Sinks.Empty<Void> done = Sinks.empty();
        Job job = new Job(client, tokens, onLastStep, done, mine);
        worker.schedule(() -> {
            if (!job.cancelled) {
                enqueue(job);
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

    /** Gives back one of a client's places in its share, forgetting a client with none left. */
    private void release(String client, AtomicInteger mine) {
        if (mine.decrementAndGet() <= 0) {
            waitingPerClient.remove(client, mine);
        }
    }

    private void enqueue(Job job) {
        ArrayDeque<Job> queue = queues.get(job.client);
        if (queue == null) {
            queue = new ArrayDeque<>();
            queues.put(job.client, queue);
            turns.addLast(job.client);
        }
        queue.addLast(job);
        lastActive.put(job.client, now());
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
        ArrayDeque<Job> queue = queues.get(job.client);
        if (queue != null) {
            queue.remove(job);
            if (queue.isEmpty()) {
                dropClient(job.client);
            }
        }
        left(job);
    }

    /** A job left the queue, formed or cancelled: its places in the bounds are given back. */
    private void left(Job job) {
        waiting.decrementAndGet();
        if (job.share != null) {
            release(job.client, job.share);
        }
    }

    private void dropClient(String client) {
        queues.remove(client);
        turns.remove(client);
        deficits.remove(client);
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
        long now = now();
        // while another client is active, each client's prompts fill at most its share of the step
        lastActive.values().removeIf(at -> now - at > RECENT.toNanos());
        long perClient = activeClients() > 1 ? Math.max(1, (long) Math.ceil(budget * clientShare)) : budget;
        long quantum = Math.max(1, model.maxBatchedTokens() / 8);
        java.util.Map<String, Long> taken = new java.util.HashMap<>();
        boolean progress = true;
        while (budget > 0 && progress && !turns.isEmpty()) {
            progress = false;
            for (int visits = turns.size(); visits > 0 && budget > 0 && !turns.isEmpty(); visits--) {
                String client = turns.pollFirst();
                ArrayDeque<Job> queue = queues.get(client);
                long used = taken.getOrDefault(client, 0L);
                long deficit = used >= perClient ? deficits.getOrDefault(client, 0L)
                        : Math.min(deficits.getOrDefault(client, 0L) + quantum, model.maxBatchedTokens());
                while (budget > 0 && deficit > 0 && used < perClient && !queue.isEmpty()) {
                    Job job = queue.peek();
                    int take = (int) Math.min(Math.min(job.remaining, budget), Math.min(deficit, perClient - used));
                    job.remaining -= take;
                    budget -= take;
                    batch += take;
                    deficit -= take;
                    used += take;
                    progress = true;
                    if (job.remaining == 0) {
                        Job formed = queue.poll();
                        formed.formed = true;
                        finishing.add(formed);
                        left(formed);
                        lastActive.put(client, now);
                    }
                }
                taken.put(client, used);
                if (queue.isEmpty()) {
                    queues.remove(client);
                    deficits.remove(client);
                } else {
                    deficits.put(client, deficit);
                    turns.addLast(client);
                }
            }
        }
        if (batch == 0) {
            return;
        }
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
        if (!turns.isEmpty()) {
            planSoon();
        }
    }

    /** Clients with prompts queued or active within {@link #RECENT}; on the worker. */
    private int activeClients() {
        int n = lastActive.size();
        for (String client : turns) {
            if (!lastActive.containsKey(client)) {
                n++;
            }
        }
        return n;
    }

    private long now() {
        return scheduler.now(TimeUnit.NANOSECONDS);
    }

    @Override
    public void close() {
        worker.dispose();
    }

    private static final class Job {
        final String client;
        int remaining;
        boolean cancelled;
        boolean formed;
        final LastStep onLastStep;
        final Sinks.Empty<Void> done;
        /** The client's count of waiting prompts this job holds a place in; null when not counted. */
        final AtomicInteger share;

        Job(String client, int tokens, LastStep onLastStep, Sinks.Empty<Void> done, AtomicInteger share) {
            this.client = client;
            this.remaining = tokens;
            this.onLastStep = onLastStep;
            this.done = done;
            this.share = share;
        }
    }
}
