package dev.kvflux.tools.cli;

import dev.kvflux.serving.metrics.RoleMetrics;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.binder.jvm.ClassLoaderMetrics;
import io.micrometer.core.instrument.binder.jvm.JvmGcMetrics;
import io.micrometer.core.instrument.binder.jvm.JvmMemoryMetrics;
import io.micrometer.core.instrument.binder.jvm.JvmThreadMetrics;
import io.micrometer.core.instrument.binder.system.FileDescriptorMetrics;
import io.micrometer.core.instrument.binder.system.ProcessorMetrics;
import io.micrometer.core.instrument.binder.system.UptimeMetrics;
import dev.kvflux.serving.observe.Tracing;
import java.util.concurrent.CountDownLatch;
import picocli.CommandLine;

/** Keeps a serving role's process alive until it is stopped (Ctrl-C, SIGTERM), then closes it. */
final class RoleRunner {
    private RoleRunner() {
    }

    /**
     * Reports a role that could not start (a port in use, an address that cannot be bound) as one line
     * on the command's error stream, without a stack trace.
     *
     * @return the exit code, 1
     */
    static int cannotStart(CommandLine cmd, RuntimeException e) {
        cmd.getErr().println("kvflux " + cmd.getCommandName() + ": " + e.getMessage());
        return 1;
    }

    /**
     * The registry of a role that is a process of its own: its {@code /metrics} also shows the JVM's
     * memory, collections, threads and classes and the process's CPU, uptime and file descriptors
     * ({@code jvm_*}, {@code process_*}, {@code system_*}), as any JVM service's would.
     */
    @SuppressWarnings("resource") // the GC listener lives as long as the process
    static MeterRegistry processMeters() {
        MeterRegistry registry = RoleMetrics.newRegistry();
        new JvmMemoryMetrics().bindTo(registry);
        new JvmGcMetrics().bindTo(registry);
        new JvmThreadMetrics().bindTo(registry);
        new ClassLoaderMetrics().bindTo(registry);
        new ProcessorMetrics().bindTo(registry);
        new UptimeMetrics().bindTo(registry);
        new FileDescriptorMetrics().bindTo(registry);
        return registry;
    }

    /** Flushes and stops a role's span export, if it has one. */
    static void close(Tracing tracing) {
        if (tracing != null) {
            tracing.close();
        }
    }

    static int runUntilStopped(AutoCloseable role) {
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                role.close();
            } catch (Exception e) {
                System.err.println("error while stopping: " + e);
            }
            stopped.countDown();
        }, "kvflux-stop"));
        try {
            stopped.await();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        return 0;
    }
}
