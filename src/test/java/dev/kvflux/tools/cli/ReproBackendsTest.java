package dev.kvflux.tools.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvflux.serving.config.KvfluxConfig;
import dev.kvflux.tools.repro.ReproBackend;
import dev.kvflux.tools.repro.gpu.GpuBackend;
import dev.kvflux.tools.repro.gpu.MoriReproBackend;
import java.io.PrintWriter;
import java.io.StringWriter;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

class ReproBackendsTest {

    @Test
    void theBackendsAreTheSimulatorsThenTheGpuOnes() {
        assertThat(ReproBackends.names()).containsExactly("sim-xgmi", "native-sim", "mori", "cuda", "hip");
        assertThat(ReproBackends.named("mori", KvfluxConfig.defaults())).isInstanceOf(MoriReproBackend.class);
        assertThat(ReproBackends.GPU).containsExactlyInAnyOrder("mori", "cuda", "hip");
    }

    @Test
    void cudaAndHipNameGpuBackendsOfThatRuntime() {
        ReproBackend cuda = ReproBackends.named("cuda", KvfluxConfig.defaults());
        ReproBackend hip = ReproBackends.named("hip", KvfluxConfig.defaults());
        assertThat(cuda).isInstanceOf(GpuBackend.class);
        assertThat(cuda.name()).isEqualTo("cuda");
        assertThat(hip).isInstanceOf(GpuBackend.class);
        assertThat(hip.name()).isEqualTo("hip");
    }

    @Test
    void anUnknownNameIsRefusedListingEveryKnownBackend() {
        assertThatThrownBy(() -> ReproBackends.named("tpu", KvfluxConfig.defaults()))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("unknown backend 'tpu'; known backends: sim-xgmi, native-sim, mori, cuda, hip");
    }

    @Test
    void theReproHelpListsEveryBackend() {
        StringWriter out = new StringWriter();
        CommandLine cli = new CommandLine(new KvfluxCli()).setOut(new PrintWriter(out));
        assertThat(cli.execute("repro", "--help")).isZero();
        String help = out.toString().replaceAll("\\s+", " ");
        assertThat(ReproBackends.names()).allSatisfy(name -> assertThat(help).contains(name));
    }
}
