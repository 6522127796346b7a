package dev.kvflux.bindings.sim;

import dev.kvflux.bindings.DurationText;
import java.time.Duration;
import java.util.Objects;

/**
 * How long the simulated engine takes to post and to run a batch of block copies.
 *
 * <p>The model has two serial resources, the posting host thread and the xGMI link:
 * <ul>
 *   <li>The host spends {@code postCostPerBlock} per block to issue a batch (one
 *       {@code hipMemcpyAsync} per block on the default path). Posts are serialized on the host, so a
 *       batch reaches the GPU at {@code max(now, host free) + blocks × postCostPerBlock}. The caller of
 *       {@code batchWrite} is not held for that time: it only delays when the copy may start.</li>
 *   <li>The link runs one batch at a time, in posting order. On the
 *       {@linkplain CopyPath#DEFAULT default path} a batch takes
 *       {@code blocks × perBlockOverhead + bytes / bytesPerSecond}; on the
 *       {@linkplain CopyPath#SCATTER_GATHER scatter/gather path} one kernel copies the whole batch, so it
 *       takes {@code kernelLaunch + bytes / bytesPerSecond}.</li>
 * </ul>
 *
 * <p>{@link #MI355X_XGMI} is calibrated on a measurement on MI355X over xGMI: 118 layers of 128 blocks ×
 * 32 KiB, one batch per layer, all posted at once, finish 0.197 s after the first post (about 0.196 s
 * after the last), which is where a 10 ms sliced wait on that hardware ended (0.183–0.210 s). On the
 * scatter/gather path the same request's copies take about 10 ms.
 */
public record CopyTiming(Duration postCostPerBlock, Duration perBlockOverhead, Duration kernelLaunch,
                         double bytesPerSecond) {

    /** 2 µs per block to post, 12.5 µs per block on the link, 20 µs per kernel, 64 GB/s. */
    public static final CopyTiming MI355X_XGMI = new CopyTiming(
            Duration.ofNanos(2_000), Duration.ofNanos(12_500), Duration.ofNanos(20_000), 64e9);

    public CopyTiming {
        Objects.requireNonNull(postCostPerBlock, "postCostPerBlock");
        Objects.requireNonNull(perBlockOverhead, "perBlockOverhead");
        Objects.requireNonNull(kernelLaunch, "kernelLaunch");
        if (postCostPerBlock.isNegative() || perBlockOverhead.isNegative() || kernelLaunch.isNegative()) {
            throw new IllegalArgumentException("copy timing costs must not be negative: post "
                    + DurationText.of(postCostPerBlock) + ", per block " + DurationText.of(perBlockOverhead)
                    + ", kernel launch " + DurationText.of(kernelLaunch));
        }
        if (!(bytesPerSecond > 0) || Double.isInfinite(bytesPerSecond)) {
            throw new IllegalArgumentException("link bandwidth must be a positive number of bytes per second, got "
                    + bytesPerSecond);
        }
    }

    /** Nanoseconds the host spends posting {@code blocks} blocks. */
    long postNanos(int blocks) {
        return postCostPerBlock.toNanos() * blocks;
    }

    /** Nanoseconds the link is busy with one batch on {@code path}. */
    long linkNanos(CopyPath path, int blocks, long bytes) {
        long transfer = (long) Math.ceil(bytes * 1e9 / bytesPerSecond);
        long fixed = path == CopyPath.SCATTER_GATHER ? kernelLaunch.toNanos() : perBlockOverhead.toNanos() * blocks;
        return fixed + transfer;
    }
}
