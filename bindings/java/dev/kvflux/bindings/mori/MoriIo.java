package dev.kvflux.bindings.mori;

import dev.kvflux.bindings.mori.internal.MoriNative;
import dev.kvflux.bindings.mori.internal.NativeLibraries;
import java.nio.file.Path;
import java.util.Objects;
import java.util.Optional;
import dev.kvflux.bindings.mori.internal.SimControls;

/**
 * MoRI IO through kvflux's C ABI ({@code bindings/native/kvflux_mori.h}), over one of its two libraries:
 * the simulator that ships in the jar ({@link #simulator()}) or the shim over the real MoRI
 * ({@link #mori()}). Engines, memory, sessions and statuses are {@link AutoCloseable} handles; closing an
 * engine releases everything still open on it.
 *
 * <p>Loading is lazy and once per JVM; a library that is missing or not a kvflux MoRI library is a
 * {@link MoriIoException} that names it and says how to build or point at it.
 */
public final class MoriIo {
    private final MoriNative lib;

    private MoriIo(MoriNative lib) {
        this.lib = lib;
    }

    /** The simulator of MoRI's xGMI backend, {@code libkvflux_mori_sim.so}, from the jar. */
    public static MoriIo simulator() {
        return new MoriIo(NativeLibraries.simulator());
    }

    /**
     * The shim over the real MoRI, {@code libkvflux_mori.so}: the path in {@code -Dkvflux.mori.lib}, else in
     * the environment variable {@code KVFLUX_MORI_LIB}, else the name on the dynamic loader's path.
     */
    public static MoriIo mori() {
        return new MoriIo(NativeLibraries.mori());
    }

    /** The library at {@code library}, which must implement {@code kvflux_mori.h}. */
    public static MoriIo load(Path library) {
        Objects.requireNonNull(library, "library");
        return new MoriIo(NativeLibraries.load(library, "MoriIo.load",
                "Give the path of libkvflux_mori.so or libkvflux_mori_sim.so (see bindings/native)"));
    }

    /** {@code native-sim} or {@code mori}, as the library reports it. */
    public String implementation() {
        return lib.implementation();
    }

    /** The library's path, or its name when the dynamic loader found it. */
    public String library() {
        return lib.library();
    }

    /** The simulator's raw controls; empty over the real MoRI. */
    Optional<SimControls> sim() {
        return lib.sim();
    }

    /** The simulator's fault injection and timing controls; empty over the real MoRI. */
    public Optional<MoriSimulator> simulatorControls() {
        return lib.sim().map(MoriSimulator::new);
    }

    /**
     * How many handles (engines, memory, sessions, statuses) are open in the library, all engines of this
     * process together: 0 once everything was released. Empty if the library keeps no count.
     */
    public java.util.OptionalLong liveHandles() {
        return lib.liveHandles();
    }

    /**
     * How many statuses of this library wait for their push (posted with {@link PushMode#ON}, neither pushed nor
     * closed yet): 0 once every request is over, a leak otherwise.
     */
    public int statusesAwaitingPush() {
        return lib.push().map(calls -> calls.waiting()).orElse(0);
    }

    /**
     * Whether MoRI's RDMA backend may be created here, as {@link MoriEngine#createRdmaBackend} checks
     * before calling MoRI: with RDMA devices listed in {@code ibClassDir} (normally
     * {@code /sys/class/infiniband}), MoRI's topology code loads {@code smiLibrary} (normally ROCm SMI,
     * {@code librocm_smi64}) and ends the process when it cannot, or on an NVIDIA build, where it finds no
     * GPU. Null arguments mean the host's own.
     *
     * @throws MoriIoException {@code KVFLUX_MORI_E_UNSUPPORTED}, saying why, when MoRI would end the process
     * @throws UnsupportedOperationException on the simulator, which has no RDMA backend to guard
     */
    public void checkRdmaBackend(String ibClassDir, String smiLibrary) {
        lib.rdmaPreflight(ibClassDir, smiLibrary);
    }

    /** An {@code IOEngine} with this key and out-of-band TCP host and port; it has no backend yet. */
    public MoriEngine createEngine(String key, String host, int port) {
        Objects.requireNonNull(key, "key");
        Objects.requireNonNull(host, "host");
        if (port < 0 || port > 0xffff) {
            throw new IllegalArgumentException("port " + port + " is outside 0..65535");
        }
        return new MoriEngine(lib, lib.engineCreate(key, host, port), key);
    }
}
