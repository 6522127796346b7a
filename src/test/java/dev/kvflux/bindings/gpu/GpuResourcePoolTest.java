package dev.kvflux.bindings.gpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/** The engine's pool of events and metadata slots, over a fake resource that counts its closes. */
class GpuResourcePoolTest {
    private final AtomicInteger made = new AtomicInteger();
    /** The ids of the resources closed, in the order they were closed. */
    private final List<Integer> closed = new ArrayList<>();
    private final GpuResourcePool<Fake> pool = new GpuResourcePool<>(() -> new Fake(made.getAndIncrement()));

    /** A resource named by the order it was made in; it may be told to fail when closed. */
    private final class Fake implements AutoCloseable {
        final int id;
        Exception failure;

        Fake(int id) {
            this.id = id;
        }

        @Override
        public void close() throws IOException {
            synchronized (closed) {
                closed.add(id);
            }
            if (failure instanceof IOException checked) {
                throw checked;
            }
            if (failure != null) {
                throw (RuntimeException) failure;
            }
        }
    }

    @Test
    void fillMakesIdleResourcesThatAcquireLendsBeforeMakingAnother() {
        pool.fill(2);
        assertThat(pool.idleCount()).isEqualTo(2);
        Fake first = pool.acquire();
        Fake second = pool.acquire();
        assertThat(List.of(first.id, second.id)).containsExactly(0, 1);
        assertThat(pool.idleCount()).isZero();
        assertThat(pool.acquire().id).isEqualTo(2);
        assertThat(made).hasValue(3);
    }

    @Test
    void aReleasedResourceIsLentAgainInsteadOfANewOne() {
        Fake lent = pool.acquire();
        pool.release(lent);
        assertThat(pool.idleCount()).isEqualTo(1);
        assertThat(pool.acquire()).isSameAs(lent);
        assertThat(made).hasValue(1);
        assertThat(closed).isEmpty();
    }

    @Test
    void closeAllClosesEveryResourceIdleOrLentOnceInTheOrderTheyWereMade() {
        pool.fill(2);
        Fake lent = pool.acquire();
        pool.acquire();
        pool.acquire();
        pool.release(lent);
        pool.closeAll();
        assertThat(closed).containsExactly(0, 1, 2);
    }

    @Test
    void aDiscardedResourceIsClosedAtOnceAndNotAgainByCloseAll() {
        pool.fill(2);
        Fake broken = pool.acquire();
        pool.discard(broken);
        assertThat(closed).containsExactly(0);
        pool.closeAll();
        assertThat(closed).containsExactly(0, 1);
    }

    @Test
    void aFailureToCloseADiscardedResourceIsDropped() {
        Fake broken = pool.acquire();
        broken.failure = new IllegalStateException("free failed");
        pool.discard(broken);
        assertThat(closed).containsExactly(0);
    }

    @Test
    void anAdoptedResourceIsClosedByCloseAllWhileLentAndNeverEntersThePool() {
        pool.adopt(new Fake(100));
        assertThat(pool.idleCount()).isZero();
        assertThat(pool.acquire().id).isZero();
        pool.closeAll();
        assertThat(closed).containsExactly(100, 0);
    }

    @Test
    void anAdoptedResourceDiscardedAfterItsBatchIsNotClosedAgain() {
        Fake oneOff = pool.adopt(new Fake(100));
        pool.discard(oneOff);
        pool.closeAll();
        assertThat(closed).containsExactly(100);
    }

    @Test
    void aFailureToCloseOneDoesNotStopTheOthersAndTheFirstIsThrown() {
        pool.fill(3);
        Fake first = pool.acquire();
        Fake second = pool.acquire();
        first.failure = new IllegalStateException("first");
        second.failure = new IllegalArgumentException("second");
        assertThatThrownBy(pool::closeAll).isInstanceOf(IllegalStateException.class).hasMessage("first");
        assertThat(closed).containsExactly(0, 1, 2);
    }

    @Test
    void aCheckedFailureToCloseIsThrownWrappedInAnIllegalStateException() {
        Fake lent = pool.acquire();
        Exception checked = new IOException("checked");
        lent.failure = checked;
        assertThatThrownBy(pool::closeAll).isInstanceOf(IllegalStateException.class).hasCause(checked);
    }

    @Test
    void closeEachClosesInOrderThroughFailuresAndThrowsTheFirst() {
        Fake a = new Fake(7);
        Fake b = new Fake(8);
        Fake c = new Fake(9);
        b.failure = new IllegalStateException("b");
        c.failure = new IllegalStateException("c");
        assertThatThrownBy(() -> GpuResourcePool.closeEach(List.of(a, b, c))).hasMessage("b");
        assertThat(closed).containsExactly(7, 8, 9);
    }

    @Test
    void threadsThatEachHoldOneAtATimeNeverMakeMoreThanOneResourceEach() throws Exception {
        int threads = 4;
        ExecutorService workers = Executors.newFixedThreadPool(threads);
        CountDownLatch start = new CountDownLatch(1);
        try {
            List<Future<?>> done = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                done.add(workers.submit(() -> {
                    start.await();
                    for (int i = 0; i < 10_000; i++) {
                        pool.release(pool.acquire());
                    }
                    return null;
                }));
            }
            start.countDown();
            for (Future<?> f : done) {
                f.get(30, TimeUnit.SECONDS);
            }
        } finally {
            workers.shutdownNow();
        }
        assertThat(made.get()).isBetween(1, threads);
        assertThat(pool.idleCount()).isEqualTo(made.get());
        pool.closeAll();
        assertThat(closed).hasSize(made.get()).doesNotHaveDuplicates();
    }
}
