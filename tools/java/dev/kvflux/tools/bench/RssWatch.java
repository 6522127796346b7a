package dev.kvflux.tools.bench;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The resident memory of a stack's role processes through an attack: {@code VmRSS} read from {@code /proc} when the
 * watch starts, every 100 ms after (the peak), and when it stops; with, at the stop, whether each role is still alive
 * and whether its log holds an {@code OutOfMemoryError}.
 */
final class RssWatch {
    private final List<AttackStack.Role> roles;
    private final Map<String, Long> before = new ConcurrentHashMap<>();
    private final Map<String, Long> peak = new ConcurrentHashMap<>();
    private final Thread sampler;
    private volatile boolean running = true;

    private RssWatch(List<AttackStack.Role> roles) {
        this.roles = roles;
        for (AttackStack.Role role : roles) {
            long now = AttackStack.rssKiB(role);
            before.put(role.name(), now);
            peak.put(role.name(), now);
        }
        this.sampler = Thread.ofVirtual().name("kvflux-rss-watch").unstarted(this::sample);
    }

    /** Starts watching {@code roles}, their memory now being the figures' {@code before}. */
    static RssWatch start(List<AttackStack.Role> roles) {
        RssWatch watch = new RssWatch(roles);
        watch.sampler.start();
        return watch;
    }

    private void sample() {
        while (running) {
            for (AttackStack.Role role : roles) {
                peak.merge(role.name(), AttackStack.rssKiB(role), Math::max);
            }
            try {
                Thread.sleep(100);
            } catch (InterruptedException e) {
                return;
            }
        }
    }

    /**
     * Stops, and returns per role: {@code ROLE_rss_mib_before}, {@code _peak}, {@code _after} (now; -1 once the
     * process is gone), {@code ROLE_oom}, {@code ROLE_alive_at_end} and, for a role that died, its
     * {@code ROLE_exit_status}.
     */
    Map<String, Object> stop() throws InterruptedException {
        running = false;
        sampler.join(2_000);
        Map<String, Object> figures = new LinkedHashMap<>();
        for (AttackStack.Role role : roles) {
            long after = AttackStack.rssKiB(role);
            figures.put(role.name() + "_rss_mib_before", AttackFigures.mib(before.get(role.name())));
            figures.put(role.name() + "_rss_mib_peak", AttackFigures.mib(Math.max(peak.get(role.name()), after)));
            figures.put(role.name() + "_rss_mib_after", after < 0 ? -1 : AttackFigures.mib(after));
        }
        for (AttackStack.Role role : roles) {
            figures.put(role.name() + "_oom", role.oom());
            figures.put(role.name() + "_alive_at_end", role.process().isAlive());
            if (!role.process().isAlive()) {
                // 134 is SIGABRT: glibc aborting on a corrupted malloc heap, say
                figures.put(role.name() + "_exit_status", role.process().exitValue());
            }
        }
        return figures;
    }
}
