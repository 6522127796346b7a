package dev.kvflux.operators;

import java.time.Duration;

/** Every completion-wait test, run on the shared poll driver: same emissions, same bounds. */
class SharedPollCompletionWaitTest extends CompletionWaitTest {
    @Override
    CompletionWait failFast(Duration timeout) {
        return CompletionWait.failFast(timeout).sharedPoll();
    }

    @Override
    CompletionWait drain(Duration timeout) {
        return CompletionWait.drain(timeout).sharedPoll();
    }
}
