package dev.kvflux.tools;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The JVM options a role process gets, from the launcher or from a tool that starts one. */
class RoleJvmTest {

    @Test
    void theDefaultsBoundHeapYoungGenerationDirectMemoryMetaspaceAndCompilerThreads() {
        assertThat(RoleJvm.defaults()).containsExactly("-XX:+UseSerialGC", "-Xmx512m", "-Xmn32m",
                "-XX:MaxDirectMemorySize=256m", "-XX:MaxMetaspaceSize=128m", "-XX:CICompilerCount=2");
    }

    @Test
    void kvfluxJavaOptsFollowTheDefaultsSoThatTheirSettingWins() {
        List<String> options = RoleJvm.options(Map.of(RoleJvm.OPTIONS_VARIABLE, "  -Xmx2g   -Dx=y "));

        assertThat(options).endsWith("-Xmx2g", "-Dx=y");
        assertThat(options.indexOf("-Xmx2g")).isGreaterThan(options.indexOf("-Xmx512m"));
    }

    @Test
    void aToolsOptionsComeLastAndTheCommandHasTheLaunchersNativeAccessFlags() {
        List<String> command = RoleJvm.command(Map.of(RoleJvm.OPTIONS_VARIABLE, "-Xmx2g"), List.of("-Xmx1g"), "Main");

        assertThat(command).contains("--enable-native-access=ALL-UNNAMED", "--sun-misc-unsafe-memory-access=allow");
        assertThat(command.subList(command.indexOf("-Xmx2g"), command.size())).startsWith("-Xmx2g", "-Xmx1g", "-cp");
        assertThat(command.getLast()).isEqualTo("Main");
    }

    @Test
    void aRoleProcessGetsTwoMallocArenasUnlessTheUserSetTheirNumber() {
        assertThat(RoleJvm.environment(new ProcessBuilder("true")).environment())
                .containsEntry("MALLOC_ARENA_MAX", System.getenv().getOrDefault("MALLOC_ARENA_MAX", "2"));
        ProcessBuilder set = new ProcessBuilder("true");
        set.environment().put("MALLOC_ARENA_MAX", "8");
        assertThat(RoleJvm.environment(set).environment()).containsEntry("MALLOC_ARENA_MAX", "8");
    }
}
