/**
 * kvflux's transfer engines: the MoRI-shaped {@link dev.kvflux.bindings.TransferEngine} API, the FFM
 * bindings to MoRI IO ({@code dev.kvflux.bindings.mori}) and to the HIP / CUDA runtime
 * ({@code dev.kvflux.bindings.gpu}), and the simulated xGMI engine ({@code dev.kvflux.bindings.sim}). The
 * {@code internal} packages (the raw downcalls, native library loading, MoRI's blocking {@code WaitAll} that
 * the Java engines share) are not exported.
 *
 * <p>The bindings require reactor-core, transitively, for two things of their API, not for any operator: a
 * backend that pushes completion announces it as a Reactor publisher ({@code PushedStatus.pushed()} is a
 * {@code Mono<StatusCode>}, and so is the GPU's pushed layer event), and the simulated engine and its layer
 * events keep time on a Reactor {@code Scheduler}, so that a {@code VirtualTimeScheduler} drives a whole
 * simulated transfer in a test. Nothing else of Reactor is used here; the operators over the statuses live in
 * {@code dev.kvflux.operators}.
 *
 * <p>The FFM code calls native functions: on the module path, run with
 * {@code --enable-native-access=dev.kvflux.bindings}; on the class path,
 * {@code --enable-native-access=ALL-UNNAMED}. msgpack-core is optional: only the MoRI and GPU memory
 * descriptors need it, and without it those calls throw an {@code IllegalStateException} that says so. It is
 * not required here: its jar has no module name of its own, only one guessed from the file name, and a
 * published descriptor must not depend on such a name. The module reads msgpack-core at run time instead,
 * from the module path or the class path, once {@code Msgpack.require} has found it.
 */
@SuppressWarnings({"requires-automatic", "requires-transitive-automatic"}) // reactor-core
module dev.kvflux.bindings {
    // PushedStatus.pushed() returns a Mono, and the simulator keeps time on a Scheduler: see above.
    requires transitive reactor.core;

    exports dev.kvflux.bindings;
    exports dev.kvflux.bindings.gpu;
    exports dev.kvflux.bindings.mori;
    exports dev.kvflux.bindings.sim;
}
