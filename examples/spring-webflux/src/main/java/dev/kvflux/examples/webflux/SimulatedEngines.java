package dev.kvflux.examples.webflux;

import dev.kvflux.bindings.sim.Fault;
import dev.kvflux.bindings.sim.SimulatedXgmiEngine;

/**
 * Makes the simulated xGMI engine a transfer runs on. The simulator takes its faults when it is built,
 * so each transfer gets an engine of its own carrying the fault its request asked for; an application
 * on real hardware would hold one engine bean (MoRI's, through {@code NativeTransferEngine}) and one
 * session per peer instead.
 */
public class SimulatedEngines {

    /** A new engine in real time with the MI355X timing, failing as {@code fault} says (null: no fault). */
    public SimulatedXgmiEngine create(FaultSpec fault) {
        SimulatedXgmiEngine.Builder builder = SimulatedXgmiEngine.builder();
        if (fault != null) {
            builder.fault(toFault(fault));
        }
        return builder.build();
    }

    private static Fault toFault(FaultSpec fault) {
        // One batch per layer on a fresh engine, so the layer index is the batch ordinal.
        return switch (fault.kind()) {
            case FAIL -> Fault.fail(fault.layer(), fault.after(), fault.codeOrDefault(), fault.messageOrDefault());
            case STALL -> Fault.stall(fault.layer());
            case SLOW -> Fault.slow(fault.layer(), fault.after());
        };
    }
}
