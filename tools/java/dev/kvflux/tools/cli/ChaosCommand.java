package dev.kvflux.tools.cli;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvflux.tools.chaos.ChaosRun;
import dev.kvflux.tools.chaos.EtcdProcess;
import dev.kvflux.tools.chaos.Netns;
import dev.kvflux.serving.http.HttpJson;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;
import dev.kvflux.transfer.KvMode;
import dev.kvflux.transfer.TpRanks;

/** {@code kvflux chaos}: the fault matrix against real prefill and decode processes. */
@Command(name = "chaos", mixinStandardHelpOptions = true,
        description = {"Runs a fault matrix against real prefill and decode processes on loopback (started with this"
                + " java and classpath) behind an in-process proxy: decode killed and restarted, prefill killed and"
                + " restarted, prefill SIGTERM,"
                + " clients disconnecting, requests rejected by validation, a burst beyond capacity, injected status"
                + " failures (one fault per failure code), stalls and late statuses, scatter/gather copies under"
                + " prefill's load, notifications lost, duplicated, delayed and reordered; then, on a real etcd"
                + " (/usr/bin/etcd, or KVFLUX_ETCD) with a prefill, two decodes and two proxies as processes of their own:"
                + " a proxy killed and restarted, etcd restarted, a decode paused past its lease, a blackhole decode"
                + " registered. Per fault it prints requests, completed, failed_cleanly, never_finished,"
                + " leaked_blocks, leaked_handles, corrupt_outputs and recovery_s (and each membership fault's own"
                + " figures), then a verdict: clean, or what broke (a request that never finished or failed"
                + " without a reason, anything leaked or corrupt, or a fault that broke its own promise, such as"
                + " reordered notifications all completing), and exits 1 when anything broke."})
public final class ChaosCommand implements Callable<Integer> {
    @Spec
    CommandLine.Model.CommandSpec spec;

    @Option(names = "--requests", paramLabel = "N", description = "Requests per fault (default ${DEFAULT-VALUE}).")
    int requests = 1000;

    @Option(names = "--concurrency", paramLabel = "N", description = "Clients at once (default ${DEFAULT-VALUE}).")
    int concurrency = 16;

    @Option(names = "--transfer-timeout", paramLabel = "DURATION", converter = DurationConverter.class,
            description = "Prefill's transfer timeout; decode's deadline is 5s more, its block lease twice it"
                    + " (default 2s).")
    Duration transferTimeout = Duration.ofSeconds(2);

    @Option(names = "--faults", paramLabel = "LIST", split = ",",
            description = "Faults to run, comma-separated (default: all of ${DEFAULT-VALUE}; sg-under-load only on"
                    + " sim-xgmi).")
    List<String> faults = ChaosRun.FAULTS;

    @Option(names = "--logs", paramLabel = "DIR", description = "Where the roles' logs go (default: a new temporary"
            + " directory).")
    Path logs;

    @Option(names = "--json", description = "Print {\"backend\": ..., \"kv_mode\": ..., \"faults\": [...]} as JSON"
            + " instead of a table.")
    boolean json;

    @Option(names = "--backend", paramLabel = "NAME",
            description = "The roles' transfer engine: sim-xgmi (default), native-sim (the C simulator through FFM,"
                    + " decode's KV in shared host memory, every block checked), cuda or hip (kvflux's GPU copy engine)"
                    + " or mori (the real MoRI IO through libkvflux_mori.so: -Dkvflux.mori.lib or KVFLUX_MORI_LIB),"
                    + " the last three with both roles' KV on --gpu; the injected status faults act on the simulators"
                    + " only.")
    String backend = "sim-xgmi";

    @Option(names = "--gpu", paramLabel = "N",
            description = "cuda, hip and mori: the GPU both roles keep their KV on (default ${DEFAULT-VALUE}).")
    int gpu;

    @Option(names = "--kv-mode", paramLabel = "MODE",
            description = "write (prefill writes into decode; default) or read (decode reads from prefill; the injected"
                    + " status faults then strike decode's reads).")
    String kvMode = "write";

    @Option(names = "--prefill-tp", paramLabel = "N",
            description = "Prefill's tensor-parallel ranks (default 1); with ranks, injected status faults and the"
                    + " notify relay strike one rank only.")
    int prefillTp = 1;

    @Option(names = "--decode-tp", paramLabel = "N", description = "Decode's tensor-parallel ranks (default 1).")
    int decodeTp = 1;

    @Option(names = "--hosts", paramLabel = "loopback|netns",
            description = "loopback (default): every process on this host's loopback. netns: the proxy and the load,"
                    + " prefill and decode each on a host of its own, a Linux network namespace joined to the others"
                    + " through a bridge (needs root and ip), for the partition faults "
                    + "(partition-prefill-decode, partition-prefill-decode-60s, partition-prefill-to-decode,"
                    + " partition-proxy-decode, isolate-decode, freeze-decode) and, with three etcd members and two"
                    + " proxies on hosts of their own too, the faults across etcd (partition-proxy-etcd: one proxy cut"
                    + " from etcd; isolate-etcd-leader; partition-decode-restart: decode killed and restarted while cut"
                    + " from prefill); all nine by default.")
    String hosts = "loopback";

    /** Set on the run this command starts inside the client host: the namespaces' prefix. */
    @Option(names = "--netns-prefix", hidden = true)
    String netnsPrefix;

    /** The hosts of {@code --hosts netns}, in the order of their addresses. */
    private static final List<String> HOSTS = ChaosRun.HOSTS;

    @Override
    public Integer call() throws Exception {
        ChaosRun.Settings settings;
        try {
            if (!EngineOptions.BACKENDS.contains(backend)) {
                throw new IllegalArgumentException("unknown backend '" + backend + "'; the roles run on "
                        + String.join(", ", EngineOptions.BACKENDS));
            }
            KvMode mode = KvMode.of(kvMode);
            TpRanks tp;
            try {
                tp = new TpRanks(prefillTp, decodeTp);
            } catch (IllegalArgumentException e) {
                throw new IllegalArgumentException("--prefill-tp " + prefillTp + " --decode-tp " + decodeTp + ": "
                        + e.getMessage());
            }
            if (gpu != 0 && !List.of("cuda", "hip", "mori").contains(backend)) {
                throw new IllegalArgumentException("--gpu chooses the GPU of --backend cuda, hip or mori; backend "
                        + backend + " keeps its KV in host memory");
            }
            if (gpu < 0 || gpu > ReproGpuOptions.MAX_GPU) {
                throw new IllegalArgumentException("--gpu must lie in 0.." + ReproGpuOptions.MAX_GPU + ", got " + gpu);
            }
            if (!hosts.equals("loopback") && !hosts.equals("netns")) {
                throw new IllegalArgumentException("--hosts must be loopback or netns, got '" + hosts + "'");
            }
            boolean onHosts = hosts.equals("netns");
            if (onHosts && faults == ChaosRun.FAULTS) {
                faults = ChaosRun.PARTITION_FAULTS;
            }
            for (String fault : faults) {
                boolean known = ChaosRun.FAULTS.contains(fault) || ChaosRun.PARTITION_FAULTS.contains(fault);
                // an unknown one is refused below, naming every fault
                if (known && ChaosRun.PARTITION_FAULTS.contains(fault) != onHosts) {
                    throw new IllegalArgumentException(onHosts ? "--hosts netns runs the partition faults only ("
                            + String.join(", ", ChaosRun.PARTITION_FAULTS) + "); " + fault + " runs on loopback"
                            : fault + " runs on hosts of their own: run it with --hosts netns");
                }
            }
            faults = faultsOn(backend, mode, faults, faults == ChaosRun.FAULTS);
            settings = new ChaosRun.Settings(requests, concurrency, transferTimeout, 256, 4, faults,
                    logs != null ? logs : java.nio.file.Files.createTempDirectory("kvflux-chaos-"), backend, mode, tp,
                    gpu);
        } catch (IllegalArgumentException e) {
            throw new CommandLine.ParameterException(spec.commandLine(), e.getMessage());
        }
        List<String> onEtcd = settings.faults().stream().filter(f -> ChaosRun.MEMBERSHIP_FAULTS.contains(f)
                || ChaosRun.ETCD_HOST_FAULTS.contains(f)).toList();
        if (!onEtcd.isEmpty()) {
            try {
                EtcdProcess.binary();
            } catch (IllegalStateException e) {
                spec.commandLine().getErr().println("kvflux chaos: " + e.getMessage() + "; or leave out the faults on"
                        + " etcd (" + String.join(", ", onEtcd) + ") with --faults");
                return 1;
            }
        }
        if (hosts.equals("netns") && netnsPrefix == null) {
            return onHostsOfTheirOwn(settings);
        }
        Netns net;
        try {
            net = netnsPrefix == null ? null : Netns.attach(netnsPrefix, HOSTS);
        } catch (IllegalArgumentException e) {
            throw new CommandLine.ParameterException(spec.commandLine(), e.getMessage());
        }
        if (net != null) {
            exitWithTheParent(netnsPrefix);
        }
        List<ChaosRun.FaultResult> results = new ChaosRun(settings, net)
                .run(line -> spec.commandLine().getErr().println(line));
        if (json) {
            spec.commandLine().getOut().println(HttpJson.write(toJson(settings, results)));
        } else {
            spec.commandLine().getOut().println("kvflux chaos on " + settings.backend()
                    + (List.of("cuda", "hip", "mori").contains(settings.backend()) ? " (GPU " + settings.gpu() + ")" : "")
                    + ", " + settings.kvMode().wireName() + " mode, prefill TP " + settings.tp().prefillTp()
                    + ", decode TP " + settings.tp().decodeTp() + ", " + settings.requests() + " requests per fault"
                    + (net == null ? "" : ", on hosts of their own (load and in-process proxy "
                            + net.address("client") + ", prefill " + net.address("prefill") + ", decode "
                            + net.address("decode") + "; for the faults across etcd, proxies and etcd members "
                            + HOSTS.subList(3, HOSTS.size()).stream().map(net::address).toList() + ")"));
            spec.commandLine().getOut().printf("%-28s %8s %9s %14s %14s %13s %14s %15s %10s %10s%n", "fault",
                    "requests", "completed", "failed_cleanly", "never_finished", "leaked_blocks", "leaked_handles",
                    "corrupt_outputs", "recovery_s", "violations");
            for (ChaosRun.FaultResult r : results) {
                Double checked = r.figures().get(dev.kvflux.tools.chaos.history.HistoryCheck.FIGURE);
                spec.commandLine().getOut().printf("%-28s %8d %9d %14d %14d %13d %14d %15d %10.3f %10s%n", r.fault(),
                        r.requests(), r.completed(), r.failedCleanly(), r.neverFinished(), r.leakedBlocks(),
                        r.leakedHandles(), r.corruptOutputs(), r.recoverySeconds(),
                        checked == null ? "-" : Long.toString(checked.longValue()));
            }
            for (ChaosRun.FaultResult r : results) {
                spec.commandLine().getOut().println(r.fault() + ": failed_without_reason " + r.failedWithoutReason()
                        + ", cancelled_by_client " + r.cancelledByClient() + ", reasons " + r.reasons()
                        + (r.figures().isEmpty() ? "" : ", figures " + r.figures()));
            }
            spec.commandLine().getOut().println("role logs: " + settings.logDir());
        }
        List<String> broken = results.stream().flatMap(r -> r.violations().stream().map(v -> r.fault() + ": " + v))
                .toList();
        java.io.PrintWriter verdict = json ? spec.commandLine().getErr() : spec.commandLine().getOut();
        if (broken.isEmpty()) {
            verdict.println("verdict: clean (" + results.size() + " faults)");
            return 0;
        }
        verdict.println("verdict: " + broken.size() + " broken: " + String.join("; ", broken));
        return 1;
    }

    /**
     * Makes the hosts, runs this same command inside the client host (where its proxy and load run, and from where it
     * starts prefill and decode on theirs), and removes the hosts when it ends, also when this process is stopped.
     */
    private Integer onHostsOfTheirOwn(ChaosRun.Settings settings) throws Exception {
        java.io.PrintWriter err = spec.commandLine().getErr();
        String why = Netns.unavailable();
        if (why != null) {
            err.println("kvflux chaos: --hosts netns: " + why);
            err.flush();
            return 1;
        }
        // as given, @-files expanded; the logs go where the run below puts them, which the user may not have named
        List<String> args = new java.util.ArrayList<>(spec.commandLine().getParseResult().expandedArgs());
        args = new java.util.ArrayList<>(args.subList(args.indexOf("chaos") + 1, args.size()));
        if (logs == null) {
            args.addAll(List.of("--logs", settings.logDir().toString()));
        }
        java.util.concurrent.atomic.AtomicReference<Netns> net = new java.util.concurrent.atomic.AtomicReference<>();
        java.util.concurrent.atomic.AtomicReference<Process> child = new java.util.concurrent.atomic.AtomicReference<>();
        java.util.concurrent.atomic.AtomicBoolean cleaned = new java.util.concurrent.atomic.AtomicBoolean();
        // once, from whichever comes first: the end of the run, or this process being stopped
        Runnable cleanup = () -> {
            if (!cleaned.compareAndSet(false, true)) {
                return;
            }
            Process run = child.get();
            if (run != null && run.isAlive()) {
                run.destroy();
                try {
                    if (!run.waitFor(30, java.util.concurrent.TimeUnit.SECONDS)) {
                        run.destroyForcibly();
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
            Netns made = net.get();
            if (made != null) {
                made.close(); // kills what still runs on the hosts, then removes them
            }
        };
        Thread hook = new Thread(cleanup, "kvflux-chaos-hosts");
        Runtime.getRuntime().addShutdownHook(hook);
        try {
            Netns made = Netns.create(HOSTS);
            net.set(made);
            if (cleaned.get()) {
                made.close(); // stopped while the hosts were made
                return 1;
            }
            err.println("hosts: " + HOSTS.stream().map(h -> h + " " + net.get().address(h)).toList()
                    + " (namespaces " + net.get().prefix() + "-*)");
            err.flush();
            // this JVM's own options (a -Dkvflux.mori.lib, say), not a role's
            List<String> command = new java.util.ArrayList<>(net.get().exec("client"));
            command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
            command.addAll(java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments());
            command.addAll(List.of("-cp", System.getProperty("java.class.path"), "dev.kvflux.tools.cli.KvfluxCli",
                    "chaos"));
            command.addAll(args);
            command.addAll(List.of("--netns-prefix", net.get().prefix()));
            child.set(new ProcessBuilder(command).inheritIO().start());
            if (cleaned.get()) {
                child.get().destroyForcibly(); // stopped as it started
                made.close();
                return 1;
            }
            return child.get().waitFor();
        } finally {
            cleanup.run();
            try {
                Runtime.getRuntime().removeShutdownHook(hook);
            } catch (IllegalStateException shuttingDown) {
                // the hook runs, or ran, the same cleanup
            }
        }
    }

    /** In the run inside the client host: exits when the process that made the hosts is gone (its pid is in them). */
    private static void exitWithTheParent(String prefix) {
        long parent = Long.parseLong(prefix.substring("kvf".length()));
        Thread watch = new Thread(() -> {
            while (ProcessHandle.of(parent).map(ProcessHandle::isAlive).orElse(false)) {
                try {
                    Thread.sleep(1000);
                } catch (InterruptedException e) {
                    return;
                }
            }
            System.err.println("kvflux chaos: the process that made the hosts is gone; stopping");
            System.exit(1);
        }, "kvflux-chaos-parent-watch");
        watch.setDaemon(true);
        watch.start();
    }

    /**
     * The faults that apply to {@code backend}: the simulated xGMI engine's copy path only there, the simulators'
     * injected status faults not on GPUs. Those the backend lacks are left out of the default list; asked for by
     * name, they are a usage error.
     */
    static List<String> faultsOn(String backend, List<String> faults, boolean byDefault) {
        return faultsOn(backend, KvMode.WRITE, faults, byDefault);
    }

    /** As {@link #faultsOn(String, List, boolean)}; in READ mode prefill's write copy path does not run either. */
    static List<String> faultsOn(String backend, KvMode mode, List<String> faults, boolean byDefault) {
        java.util.Set<String> lacking = new java.util.LinkedHashSet<>();
        if (!backend.equals("sim-xgmi") || mode == KvMode.READ) {
            lacking.add("sg-under-load");
        }
        if (backend.equals("cuda") || backend.equals("hip") || backend.equals("mori")) {
            for (String fault : ChaosRun.FAULTS) {
                if (fault.startsWith("status-")) {
                    lacking.add(fault);
                }
            }
        }
        List<String> missing = faults.stream().filter(lacking::contains).toList();
        if (!missing.isEmpty() && !byDefault) {
            throw new IllegalArgumentException("fault" + (missing.size() == 1 ? " " : "s ") + String.join(", ", missing)
                    + " act on a simulated engine that backend " + backend + (mode == KvMode.READ ? " in READ mode" : "")
                    + " does not have; leave "
                    + (missing.size() == 1 ? "it" : "them") + " out of --faults");
        }
        return faults.stream().filter(f -> !lacking.contains(f)).toList();
    }

    /** The report: what the roles ran on (backend, GPU, KV mode, ranks), then each fault's figures. */
    static ObjectNode toJson(ChaosRun.Settings settings, List<ChaosRun.FaultResult> results) {
        ObjectNode root = HttpJson.MAPPER.createObjectNode().put("backend", settings.backend());
        if (List.of("cuda", "hip", "mori").contains(settings.backend())) {
            root.put("gpu", settings.gpu());
        }
        root.put("kv_mode", settings.kvMode().wireName()).put("prefill_tp", settings.tp().prefillTp())
                .put("decode_tp", settings.tp().decodeTp()).put("requests", settings.requests());
        root.put("clean", results.stream().allMatch(r -> r.violations().isEmpty()));
        ArrayNode array = root.putArray("faults");
        for (ChaosRun.FaultResult r : results) {
            ObjectNode f = array.addObject().put("fault", r.fault()).put("requests", r.requests())
                    .put("completed", r.completed()).put("failed_cleanly", r.failedCleanly())
                    .put("never_finished", r.neverFinished()).put("leaked_blocks", r.leakedBlocks())
                    .put("leaked_handles", r.leakedHandles()).put("corrupt_outputs", r.corruptOutputs())
                    .put("recovery_s", r.recoverySeconds()).put("failed_without_reason", r.failedWithoutReason())
                    .put("cancelled_by_client", r.cancelledByClient());
            f.set("reasons", HttpJson.MAPPER.valueToTree(r.reasons()));
            f.set("violations", HttpJson.MAPPER.valueToTree(r.violations()));
            if (!r.figures().isEmpty()) {
                f.set("figures", HttpJson.MAPPER.valueToTree(new java.util.TreeMap<>(r.figures())));
            }
        }
        return root;
    }
}
