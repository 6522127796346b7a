package dev.kvflux.tools.cli;

import dev.kvflux.serving.role.ServingModel;
import java.time.Duration;
import picocli.CommandLine;
import picocli.CommandLine.Option;

/** The simulated model's knobs, for the serving subcommands ({@code @Mixin ModelOptions}). */
public final class ModelOptions {
    private static final ServingModel BASE = ServingModel.DEEPSEEK_V2_LITE_MI355X;

    @Option(names = "--prefill-tokens-per-second", paramLabel = "N",
            description = "Simulated prefill rate (default ${DEFAULT-VALUE}, fitted to DeepSeek-V2-Lite figures measured on MI355X).")
    double prefillTokensPerSecond = BASE.prefillTokensPerSecond();

    @Option(names = "--max-batched-tokens", paramLabel = "N",
            description = "Most prompt tokens in one prefill step (default ${DEFAULT-VALUE}).")
    int maxBatchedTokens = BASE.maxBatchedTokens();

    @Option(names = "--layers", paramLabel = "N", description = "Layers whose KV is written (default ${DEFAULT-VALUE}).")
    int layers = BASE.layers();

    @Option(names = "--decode-step", paramLabel = "DURATION", converter = DurationConverter.class,
            description = "Time of one decode step, one output token (default 20ms).")
    Duration decodeStep = BASE.decodeStep();

    @Option(names = "--model-time", paramLabel = "FACTOR",
            description = "Scales the simulated prefill and decode steps (default 1); 0 makes them cost nothing, so"
                    + " that only orchestration and the copies remain.")
    double modelTime = 1;

    /**
     * The model these options describe.
     *
     * @throws CommandLine.ParameterException saying which value is wrong, for {@code cmd}'s usage message
     */
    ServingModel model(CommandLine cmd) {
        try {
            return new ServingModel(BASE.name(), prefillTokensPerSecond, maxBatchedTokens, layers, decodeStep,
                    BASE.blockTokens(), BASE.kvBytesPerTokenPerLayer()).withModelTime(modelTime);
        } catch (IllegalArgumentException e) {
            throw new CommandLine.ParameterException(cmd, "invalid simulated model: " + e.getMessage());
        }
    }
}
