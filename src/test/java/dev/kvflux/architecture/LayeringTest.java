package dev.kvflux.architecture;

import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses;
import static com.tngtech.archunit.library.dependencies.SlicesRuleDefinition.slices;

import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import com.tngtech.archunit.core.importer.ImportOption;
import org.junit.jupiter.api.Test;

/** The three layers depend one way: pipeline → operators → bindings. */
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
    void thePipelinesPackagesAreFreeOfCycles() {
        slices().matching("dev.kvflux.pipeline.(*)..").should().beFreeOfCycles().check(MAIN);
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
