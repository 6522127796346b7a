package dev.kvflux.serving.role;

import java.time.Duration;
import java.util.Objects;

/**
 * The simulated model the serving roles run instead of a real one: how fast prefill turns prompt tokens
 * into KV, how many tokens one prefill step takes at most, how many layers write KV, how long one decode
 * step is, and the KV cache's block geometry.
 *
 * <p>{@link #DEEPSEEK_V2_LITE_MI355X} is the setup of vLLM's MoRI-IO serving measurements: DeepSeek-V2-Lite (27 layers, MLA with
 * a 512 + 64 wide latent in bf16, so 1,152 bytes per token per layer), 64-token blocks,
 * {@code --max-num-batched-tokens 32768}; the prefill rate is fitted to their figures (16K-token
 * prompts at concurrency 16 reached 7.1–7.2 requests per second, about 116K prompt tokens per second,
 * and concurrency 8 gave a client TTFT of about 1.08 s). The decode step is an assumption (20 ms).
 */
public record ServingModel(String name, double prefillTokensPerSecond, int maxBatchedTokens, int layers,
                           Duration decodeStep, int blockTokens, int kvBytesPerTokenPerLayer) {

    /**
     * The most KV blocks a role may have (2^24, as the command line allows). Each role's KV region has one row of
     * its own {@code --kv-blocks} per layer ({@code KvLayout.rows}); prefill learns the length of decode's rows
     * from the region decode describes with each block list.
     */
    public static final int ROW_BLOCKS = 1 << 24;

    public static final ServingModel DEEPSEEK_V2_LITE_MI355X =
            new ServingModel("deepseek-v2-lite-mi355x-sim", 116_000, 32_768, 27, Duration.ofMillis(20), 64, 1152);

    public ServingModel {
        Objects.requireNonNull(name, "name");
        Objects.requireNonNull(decodeStep, "decodeStep");
        if (!(prefillTokensPerSecond > 0) || Double.isInfinite(prefillTokensPerSecond)) {
            throw new IllegalArgumentException("prefill rate must be a positive number of tokens per second, got "
                    + prefillTokensPerSecond);
        }
        if (maxBatchedTokens < 1 || layers < 1 || blockTokens < 1 || kvBytesPerTokenPerLayer < 1) {
            throw new IllegalArgumentException("max batched tokens, layers, block tokens and KV bytes per token"
                    + " must all be at least 1, got " + maxBatchedTokens + ", " + layers + ", " + blockTokens
                    + ", " + kvBytesPerTokenPerLayer);
        }
        if (decodeStep.isNegative() || decodeStep.isZero()) {
            throw new IllegalArgumentException("decode step must be positive, got " + decodeStep);
        }
    }

    /** This model with another prefill rate, in tokens per second. */
    public ServingModel withPrefillRate(double tokensPerSecond) {
        return new ServingModel(name, tokensPerSecond, maxBatchedTokens, layers, decodeStep, blockTokens,
                kvBytesPerTokenPerLayer);
    }

    /** This model with another decode step. */
    public ServingModel withDecodeStep(Duration step) {
        return new ServingModel(name, prefillTokensPerSecond, maxBatchedTokens, layers, step, blockTokens,
                kvBytesPerTokenPerLayer);
    }

    /**
     * This model with its prefill and decode steps taking {@code factor} times as long: 0 makes them cost nothing
     * (a step of 1 ns, the shortest a model may have), so that what remains is orchestration and the copies.
     *
     * @throws IllegalArgumentException if {@code factor} is negative, not a number or infinite
     */
    public ServingModel withModelTime(double factor) {
        if (!(factor >= 0) || Double.isInfinite(factor)) {
            throw new IllegalArgumentException("model time must be a factor of 0 or more (0: steps cost nothing, 1:"
                    + " as the model says), got " + factor);
        }
        if (factor == 1) {
            return this;
        }
        double rate = factor == 0 ? Double.MAX_VALUE : Math.min(Double.MAX_VALUE, prefillTokensPerSecond / factor);
        Duration step = Duration.ofNanos(Math.max(1, (long) (decodeStep.toNanos() * factor)));
        return new ServingModel(name, rate, maxBatchedTokens, layers, step, blockTokens, kvBytesPerTokenPerLayer);
    }

    /** How long a prefill step of {@code tokens} tokens runs. */
    public Duration stepTime(int tokens) {
        return Duration.ofNanos(Math.max(1, (long) Math.ceil(tokens * 1e9 / prefillTokensPerSecond)));
    }

    /** How many KV blocks a prompt of {@code tokens} tokens fills. */
    public int blocksFor(int tokens) {
        return Math.max(1, (tokens + blockTokens - 1) / blockTokens);
    }

    /** Bytes of one block of one layer. */
    public long blockBytes() {
        return (long) blockTokens * kvBytesPerTokenPerLayer;
    }

    @Override
    public String toString() {
        return name + " (prefill " + (long) prefillTokensPerSecond + " tokens/s, at most " + maxBatchedTokens
                + " tokens per step, " + layers + " layers, decode step " + decodeStep.toMillis() + " ms, "
                + blockTokens + "-token blocks of " + kvBytesPerTokenPerLayer + " B per token per layer)";
    }
}
