package dev.kvflux.serving.role;

import dev.kvflux.bindings.gpu.GpuRuntime;
import dev.kvflux.transfer.KvMode;
import dev.kvflux.transfer.TpRanks;
import dev.kvflux.serving.api.CompletionSchema;
import dev.kvflux.serving.http.HttpLimits;
import dev.kvflux.transfer.notify.NotifyAuth;
import dev.kvflux.transfer.notify.NotifyLimits;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.observation.ObservationRegistry;
import java.util.Objects;

/**
 * The settings prefill and decode share: where they listen, their model, notify signing and limits, their KV
 * blocks, and where their meters and observations go. Each setter checks its value and returns the role's own
 * builder ({@link PrefillServer.Builder}, {@link DecodeServer.Builder}).
 *
 * @param <B> the role's builder
 */
public abstract sealed class RoleSettings<B extends RoleSettings<B>>
        permits PrefillServer.Builder, DecodeServer.Builder {
    RoleAddresses where = RoleAddresses.loopback();
    ServingModel model;
    NotifyAuth auth;
    int kvBlocks;
    NotifyLimits limits = NotifyLimits.DEFAULTS;
    MeterRegistry meterRegistry;
    ObservationRegistry observations = ObservationRegistry.NOOP;
    dev.kvflux.serving.observe.Handover.Listener handover = dev.kvflux.serving.observe.Handover.Listener.NONE;
    int maxModelLen = CompletionSchema.DEFAULT_MAX_MODEL_LEN;
    double maxRequestShare = 1.0;
    double clientShare = ClientShares.DEFAULT_SHARE;
    java.util.function.Predicate<java.net.InetAddress> unsignedFrom = address -> false;
    int gpu;
    GpuRuntime gpuRuntime;
    KvMode kvMode = KvMode.WRITE;
    int tp = 1;
    int peerTp = 1;
    java.nio.file.Path historyLog;

    RoleSettings(int defaultKvBlocks) {
        this.kvBlocks = defaultKvBlocks;
    }

    @SuppressWarnings("unchecked")
    private B self() {
        return (B) this;
    }

    /** Where its HTTP and notify ports are bound (port 0 picks a free one); default loopback, free ports. */
    public B addresses(RoleAddresses where) {
        this.where = Objects.requireNonNull(where, "where");
        return self();
    }

    /** The model whose steps are simulated and whose KV cache is written or received. */
    public B model(ServingModel model) {
        this.model = Objects.requireNonNull(model, "model");
        return self();
    }

    /** Signs its notifications and accepts only signed ones with {@code auth}; {@code null} (default) for none. */
    public B auth(NotifyAuth auth) {
        this.auth = auth;
        return self();
    }

    /**
     * {@code kvBlocks} KV blocks: a request whose prompt needs more blocks than are free is refused at once
     * with 503 ({@code "code": "kv_blocks_exhausted"}).
     *
     * @throws IllegalArgumentException if {@code kvBlocks} is not in 1..16777216
     */
    public B kvBlocks(int kvBlocks) {
        if (kvBlocks < 1 || kvBlocks > ServingModel.ROW_BLOCKS) {
            throw new IllegalArgumentException("--kv-blocks must be in 1.." + ServingModel.ROW_BLOCKS + ", got "
                    + kvBlocks);
        }
        this.kvBlocks = kvBlocks;
        return self();
    }

    /**
     * The GPU the role keeps its KV on, for engines on GPUs (default 0); host-memory engines ignore it.
     *
     * @throws IllegalArgumentException if {@code gpu} is negative
     */
    public B gpu(int gpu) {
        if (gpu < 0) {
            throw new IllegalArgumentException("--gpu must be 0 or more, got " + gpu);
        }
        this.gpu = gpu;
        return self();
    }

    /**
     * Who moves the KV ({@code --kv-mode}): {@link KvMode#WRITE} (default), prefill writes into decode;
     * {@link KvMode#READ}, decode reads from prefill, layer by layer. Prefill and decode must run the same mode.
     */
    public B kvMode(KvMode kvMode) {
        this.kvMode = java.util.Objects.requireNonNull(kvMode, "kvMode");
        return self();
    }

    /**
     * Runs {@code tp} tensor-parallel ranks ({@code --tp}), threads of this process, each with its own engine, KV
     * region, blocks and notify server; each holds {@code 1 / tp} of the KV heads ({@link TpRanks}). Default 1.
     *
     * @throws IllegalArgumentException if it is not a power of two in 1..{@value TpRanks#MAX_TP}
     */
    public B tp(int tp) {
        this.tp = TpRanks.check("--tp", tp);
        return self();
    }

    /**
     * How many ranks the other role runs ({@code --peer-tp}, default 1): each rank's KV region is cut into the
     * shards of that pair ({@link TpRanks}), so a request from a peer of another TP size is refused with 400.
     *
     * @throws IllegalArgumentException if it is not a power of two in 1..{@value TpRanks#MAX_TP}
     */
    public B peerTp(int peerTp) {
        this.peerTp = TpRanks.check("--peer-tp", peerTp);
        return self();
    }

    /**
     * The GPU runtime that allocates the role's KV on {@link #gpu}, for an engine over the real MoRI, which registers
     * memory it is given ({@code NativeTransferEngine.mori}); the other engines allocate their own.
     */
    public B gpuRuntime(GpuRuntime gpuRuntime) {
        this.gpuRuntime = gpuRuntime;
        return self();
    }

    /**
     * The longest request, prompt and {@code max_tokens} together, in tokens: a longer one is refused with 400
     * {@code context_length_exceeded}. Default {@value CompletionSchema#DEFAULT_MAX_MODEL_LEN}.
     *
     * @throws IllegalArgumentException if it is not positive
     */
    public B maxModelLen(int maxModelLen) {
        if (maxModelLen < 1) {
            throw new IllegalArgumentException("--max-model-len must be at least 1, got " + maxModelLen);
        }
        this.maxModelLen = maxModelLen;
        return self();
    }

    /**
     * The largest share of the role's KV blocks one request may hold (0 to 1): a request that needs more is refused
     * with 400 {@code request_too_large}, so a handful of long prompts cannot take every block. Default 1 (no cap
     * beyond the model length).
     *
     * @throws IllegalArgumentException if it is not in (0, 1]
     */
    public B maxRequestShare(double maxRequestShare) {
        if (!(maxRequestShare > 0 && maxRequestShare <= 1)) {
            throw new IllegalArgumentException("the largest share of KV blocks one request may hold must be in (0, 1],"
                    + " got " + maxRequestShare);
        }
        this.maxRequestShare = maxRequestShare;
        return self();
    }

    /**
     * The largest share of the role's KV blocks one client may hold at once (more than 0, at most 1), and, on prefill,
     * of its queue of prompts and of a prefill step while other clients have prompts waiting: a request beyond it is
     * refused with 429 {@code client_over_share}, so one client's long prompts cannot take every block or every step.
     * A client is the key the proxy names it by (its API key, else its address); requests that name none are not
     * counted. 1 turns the share off. Default {@value ClientShares#DEFAULT_SHARE}.
     *
     * @throws IllegalArgumentException if it is not in (0, 1]
     */
    public B clientShare(double clientShare) {
        if (!(clientShare > 0 && clientShare <= 1)) {
            throw new IllegalArgumentException("--client-share must be more than 0 and at most 1, got " + clientShare);
        }
        this.clientShare = clientShare;
        return self();
    }

    /**
     * Takes unsigned requests from the addresses {@code from} allows, beside those the proxy signed: vLLM's proxy, in
     * front of a role registered with it ({@code --vllm-proxy}), signs nothing. Default: none.
     */
    public B unsignedFrom(java.util.function.Predicate<java.net.InetAddress> from) {
        this.unsignedFrom = Objects.requireNonNull(from, "from");
        return self();
    }

    /**
     * Refuses to bind a non-loopback address without a notify secret: the role would take unsigned requests from
     * the network, and a request names where the role connects.
     *
     * @throws IllegalStateException saying what to set
     */
    void requireSecretOffLoopback(String role) {
        if (auth == null && !HttpLimits.isLoopback(where.host())) {
            throw new IllegalStateException(role + " binds " + where.host() + ", not a loopback address, without a"
                    + " notify secret; give it the cluster's secret (auth(...), KVFLUX_NOTIFY_SECRET or notify.secret)"
                    + " so that it serves only requests the proxy signed");
        }
    }

    /**
     * Rank {@code rank}'s notify port: the notify port plus the rank, as vLLM's ranks offset theirs; a free port for
     * every rank when the notify port is 0.
     *
     * @throws IllegalArgumentException if the rank's port would be past 65535
     */
    static int rankPort(int notifyPort, int rank) {
        if (notifyPort == 0) {
            return 0;
        }
        if (notifyPort + rank > 65535) {
            throw new IllegalArgumentException("rank " + rank + " listens on the notify port + " + rank + ", past 65535;"
                    + " give a lower --notify-port");
        }
        return notifyPort + rank;
    }

    /** The most blocks one request may hold under {@link #maxRequestShare}: at least 1, no cap at a share of 1. */
    int maxBlocksPerRequest() {
        return maxRequestShare >= 1 ? Integer.MAX_VALUE : Math.max(1, (int) Math.floor(kvBlocks * maxRequestShare));
    }

    /** What the notify channel grants peers; default {@link NotifyLimits#DEFAULTS}. */
    public B limits(NotifyLimits limits) {
        this.limits = Objects.requireNonNull(limits, "limits");
        return self();
    }

    /**
     * The registry the role's meters go to, each tagged with the role ({@code role=prefill} or
     * {@code role=decode}); by default a new Prometheus registry of its own. {@code GET /metrics} serves it
     * when it is a Prometheus registry (or a composite holding one), otherwise a Prometheus registry added
     * beside it ({@link RoleMetrics#of}).
     */
    public B meterRegistry(MeterRegistry meterRegistry) {
        this.meterRegistry = Objects.requireNonNull(meterRegistry, "meterRegistry");
        return self();
    }

    /**
     * Where the requests' observations go; default {@link ObservationRegistry#NOOP}: nothing is traced and no
     * trace context is sent on.
     */
    public B observationRegistry(ObservationRegistry observations) {
        this.observations = Objects.requireNonNull(observations, "observations");
        return self();
    }

    /**
     * Who hears each request's handover stages as the role marks them, with their times
     * ({@link dev.kvflux.serving.observe.Handover}); default nobody. The role times its stages into
     * {@code kvflux_handover_stage_seconds} either way.
     */
    public B handover(dev.kvflux.serving.observe.Handover.Listener listener) {
        this.handover = Objects.requireNonNull(listener, "listener");
        return self();
    }

    /**
     * Appends every transfer's history to {@code file}, one JSON line per event
     * ({@link dev.kvflux.serving.observe.HistoryLog}), for the chaos runs' history checker; {@code null} (the
     * default) for none. The role opens it when it starts and closes it when it stops.
     */
    public B historyLog(java.nio.file.Path file) {
        this.historyLog = file;
        return self();
    }

    /** The role's history log, opened; null when none was asked for. */
    final dev.kvflux.serving.observe.HistoryLog openHistory(String role) {
        return historyLog == null ? null : dev.kvflux.serving.observe.HistoryLog.open(historyLog, role);
    }
}
