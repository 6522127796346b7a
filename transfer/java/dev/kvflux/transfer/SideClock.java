package dev.kvflux.transfer;

import java.util.concurrent.TimeUnit;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;

/**
 * The timers and the clock of one side. With a scheduler given to the side's builder, every timer runs on it and
 * every time is read from its {@link Scheduler#now(TimeUnit)}, so that one {@code VirtualTimeScheduler} moves the
 * receive deadline, the lease, the retries and the reapers together; without one, timers run on
 * {@link Schedulers#parallel()} (looked up at each use, as Reactor's operators do) and times are
 * {@link System#nanoTime()}.
 */
final class SideClock {
    /** The scheduler the builder was given; null for the defaults. */
    private final Scheduler scheduler;

    SideClock(Scheduler scheduler) {
        this.scheduler = scheduler;
    }

    /** Where the side's timers run. */
    Scheduler scheduler() {
        return scheduler != null ? scheduler : Schedulers.parallel();
    }

    /** The scheduler given to the builder, or null: to hand on to what has a default of its own. */
    Scheduler given() {
        return scheduler;
    }

    /** Now, in nanoseconds of the side's clock; only differences mean anything. */
    long nanos() {
        return scheduler != null ? scheduler.now(TimeUnit.NANOSECONDS) : System.nanoTime();
    }
}
