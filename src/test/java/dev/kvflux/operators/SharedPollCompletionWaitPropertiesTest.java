package dev.kvflux.operators;

/** Every completion-wait property, checked on the shared poll driver. */
class SharedPollCompletionWaitPropertiesTest extends CompletionWaitPropertiesTest {
    @Override
    CompletionWait wait(FailMode mode) {
        return super.wait(mode).sharedPoll();
    }
}
