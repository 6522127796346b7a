package dev.kvflux.tools.cli;

import dev.kvflux.serving.config.KvfluxConfig;
import dev.kvflux.transfer.notify.NotifyAuth;
import picocli.CommandLine;

/**
 * The notify secret of the serving subcommands: {@value NotifyAuth#ENV} when set and not empty, else the
 * configuration's {@code notify.secret}; none when both are empty.
 */
final class NotifySecret {
    private NotifySecret() {
    }

    /** The secret's signer, or {@code null} when there is no secret. */
    static NotifyAuth resolve(KvfluxConfig config, CommandLine cmd) {
        return resolve(config, System.getenv(NotifyAuth.ENV), cmd);
    }

    static NotifyAuth resolve(KvfluxConfig config, String fromEnvironment, CommandLine cmd) {
        boolean fromEnv = fromEnvironment != null && !fromEnvironment.isEmpty();
        String secret = fromEnv ? fromEnvironment : config.notifyChannel().secret();
        if (secret.isEmpty()) {
            return null;
        }
        try {
            return NotifyAuth.of(secret);
        } catch (IllegalArgumentException e) {
            throw new CommandLine.ParameterException(cmd, (fromEnv ? NotifyAuth.ENV : "notify.secret") + ": "
                    + e.getMessage());
        }
    }
}
