package dev.kvflux.architecture;

import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses;
import static com.tngtech.archunit.library.dependencies.SlicesRuleDefinition.slices;

import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import com.tngtech.archunit.core.importer.ImportOption;
import org.junit.jupiter.api.Test;

/**
 * The layers depend one way: tools → serving → transfer → pipeline → operators → bindings (micrometer beside the
 * pipeline, over the operators). No server imports a tool, and the proxy and the roles speak to each other only
 * through the wire contract in {@code serving.api}.
 */
class LayeringTest {
    private static final JavaClasses MAIN = new ClassFileImporter()
            .withImportOption(ImportOption.Predefined.DO_NOT_INCLUDE_TESTS)
            .importPackages("dev.kvflux");

    @Test
    void bindingsUseNeitherOperatorsNorPipeline() {
        noClasses().that().resideInAPackage("dev.kvflux.bindings..")
                .should().dependOnClassesThat().resideInAnyPackage("dev.kvflux.operators..", "dev.kvflux.pipeline..")
                .check(MAIN);
    }

    @Test
    void operatorsDoNotUseThePipeline() {
        noClasses().that().resideInAPackage("dev.kvflux.operators..")
                .should().dependOnClassesThat().resideInAPackage("dev.kvflux.pipeline..")
                .check(MAIN);
    }

    @Test
    void thePipelineUsesNeitherTheTransferLibraryNorTheApplication() {
        noClasses().that().resideInAPackage("dev.kvflux.pipeline..")
                .should().dependOnClassesThat().resideInAnyPackage("dev.kvflux.transfer..", "dev.kvflux.serving..",
                        "dev.kvflux.tools..")
                .check(MAIN);
    }

    @Test
    void theTransferLibraryUsesNeitherServingNorTools() {
        noClasses().that().resideInAPackage("dev.kvflux.transfer..")
                .should().dependOnClassesThat().resideInAnyPackage("dev.kvflux.serving..", "dev.kvflux.tools..")
                .check(MAIN);
    }

    @Test
    void noServerImportsATool() {
        noClasses().that().resideInAPackage("dev.kvflux.serving..")
                .should().dependOnClassesThat().resideInAPackage("dev.kvflux.tools..")
                .check(MAIN);
    }

    @Test
    void theProxyAndTheRolesDoNotImportEachOther() {
        noClasses().that().resideInAPackage("dev.kvflux.serving.proxy..")
                .should().dependOnClassesThat().resideInAPackage("dev.kvflux.serving.role..")
                .check(MAIN);
        noClasses().that().resideInAPackage("dev.kvflux.serving.role..")
                .should().dependOnClassesThat().resideInAPackage("dev.kvflux.serving.proxy..")
                .check(MAIN);
    }

    @Test
    void eachModulesPackagesAreFreeOfCycles() {
        for (String module : new String[] {"transfer", "serving", "tools"}) { // kvflux-pipeline is one package
            slices().matching("dev.kvflux." + module + ".(*)..").should().beFreeOfCycles().check(MAIN);
        }
    }

    @Test
    void inTheBindingsOnlyTheDescriptorCodecsUseMsgpackCoreWhichIsOptional() {
        noClasses().that().resideInAPackage("dev.kvflux.bindings..")
                .and().doNotHaveFullyQualifiedName("dev.kvflux.bindings.gpu.GpuMemoryDescriptor$Codec")
                .and().doNotHaveFullyQualifiedName("dev.kvflux.bindings.mori.MoriEngine$DescriptorKey")
                .should().dependOnClassesThat().resideInAPackage("org.msgpack..")
                .because("msgpack-core is optional in kvflux-bindings: only a class loaded after Msgpack.require"
                        + " may touch it")
                .check(MAIN);
    }
}
