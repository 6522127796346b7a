package dev.kvflux.serving.role;

import dev.kvflux.serving.metrics.RoleMetrics;
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
}
