package dev.kvflux.transfer;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvflux.transfer.BlockAllocator.State;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.Tuple;
import org.junit.jupiter.api.Test;

/** The KV block allocator's states and the invariants its class comment names. */
class BlockAllocatorTest {
    private static final Duration LEASE = Duration.ofSeconds(60);

    @Test
    void outOfBlocksThrowsWithAReasonAndChangesNothing() {
        BlockAllocator blocks = new BlockAllocator("decode", 10, () -> 0);
        blocks.allocate("a", 7);

        assertThatThrownBy(() -> blocks.allocate("b", 4))
                .isInstanceOf(BlockAllocator.OutOfBlocksException.class)
                .hasMessageContaining("decode is out of KV blocks").hasMessageContaining("needs 4 blocks, 3 of 10");
        assertThat(blocks.held()).isEqualTo(7);
        assertThat(blocks.stateOf("b")).isEqualTo(State.FREE);
        assertThat(blocks.snapshot().refusedOutOfBlocks()).isEqualTo(1);
        assertThat(blocks.allocate("b", 3)).hasSize(3);
    }

    @Test
    void aRequestLargerThanTheWholeCapacityIsNotToldToRetry() {
        BlockAllocator blocks = new BlockAllocator("decode", 10, () -> 0);

        assertThatThrownBy(() -> blocks.allocate("a", 11))
                .isInstanceOf(BlockAllocator.OutOfBlocksException.class)
                .hasMessageContaining("needs 11 blocks, more than the 10 it has in all")
                .hasMessageNotContaining("retry later");
    }

    @Test
    void blocksOfAnEndedRequestAreNotReusedBeforeThePeersRelease() {
        BlockAllocator blocks = new BlockAllocator("decode", 4, () -> 0);
        List<Long> first = blocks.allocate("a", 4);
        blocks.writing("a");

        assertThat(blocks.end("a", LEASE)).isEqualTo(State.QUARANTINED);
        assertThatThrownBy(() -> blocks.allocate("b", 1)).isInstanceOf(BlockAllocator.OutOfBlocksException.class);

        assertThat(blocks.release("a")).isTrue();
        assertThat(blocks.allocate("b", 4)).containsExactlyInAnyOrderElementsOf(first);
    }

    @Test
    void aReleaseBeforeTheRequestEndsFreesTheBlocksWhenItEnds() {
        BlockAllocator blocks = new BlockAllocator("decode", 4, () -> 0);
        blocks.allocate("a", 2);
        blocks.writing("a");

        assertThat(blocks.release("a")).isTrue();
        assertThat(blocks.stateOf("a")).as("still in use by its running request").isEqualTo(State.WRITING);
        assertThat(blocks.end("a", LEASE)).isEqualTo(State.FREE);
        assertThat(blocks.held()).isZero();
    }

    @Test
    void quarantinedBlocksAreReclaimedOnlyOnceTheLeaseHasPassedSinceTheRequestEnded() {
        AtomicLong now = new AtomicLong();
        BlockAllocator blocks = new BlockAllocator("decode", 4, now::get);
        blocks.allocate("a", 2);
        now.addAndGet(Duration.ofSeconds(100).toNanos());
        blocks.end("a", LEASE);

        now.addAndGet(LEASE.toNanos() - 1);
        assertThat(blocks.reclaimExpired()).isEmpty();
        now.addAndGet(1);
        assertThat(blocks.reclaimExpired()).containsExactly("a");
        assertThat(blocks.held()).isZero();
        assertThat(blocks.snapshot().leaseExpired()).isEqualTo(1);
        assertThat(blocks.release("a")).as("a late release changes nothing").isFalse();
    }

    @Test
    void aRequestThatEndedBeforeItsReceiveDeadlineKeepsItsBlocksUntilALeaseAfterThatDeadline() {
        AtomicLong now = new AtomicLong();
        BlockAllocator blocks = new BlockAllocator("decode", 4, now::get);
        blocks.allocate("a", 2);
        blocks.writing("a");
        long receiveDeadline = now.get() + Duration.ofSeconds(45).toNanos();
        now.addAndGet(Duration.ofSeconds(1).toNanos()); // the client left after 1 s; prefill may still write until 45 s

        blocks.end("a", LEASE, receiveDeadline);

        now.set(receiveDeadline + LEASE.toNanos() - 1);
        assertThat(blocks.reclaimExpired()).as("a lease from the end alone would have passed").isEmpty();
        now.addAndGet(1);
        assertThat(blocks.reclaimExpired()).containsExactly("a");
    }

    @Test
    void snapshotCountsBlocksPerStateAndTheOldestGrantsAge() {
        AtomicLong now = new AtomicLong();
        BlockAllocator blocks = new BlockAllocator("prefill", 10, now::get);
        blocks.allocate("old", 1);
        now.addAndGet(Duration.ofMillis(250).toNanos());
        blocks.allocate("w", 2);
        blocks.writing("w");
        blocks.allocate("q", 3);
        blocks.end("q", LEASE);

        BlockAllocator.Snapshot snap = blocks.snapshot();

        assertThat(snap.blocks()).containsExactlyInAnyOrderEntriesOf(Map.of(State.FREE, 4, State.ALLOCATED, 1,
                State.WRITING, 2, State.QUARANTINED, 3));
        assertThat(snap.oldestAgeMillis()).isEqualTo(250);
        assertThat(snap.owners()).isEqualTo(3);
    }

    @Test
    void anOwnerHoldsOneGrantAtATime() {
        BlockAllocator blocks = new BlockAllocator("decode", 4, () -> 0);
        blocks.allocate("a", 1);
        assertThatThrownBy(() -> blocks.allocate("a", 1)).isInstanceOf(IllegalStateException.class);
    }

    /** One step of a random history: an operation on one of a few owners. */
    enum Op { ALLOCATE, WRITING, END, RELEASE, FREE, ADVANCE, REAP }

    @Provide
    Arbitrary<List<Tuple.Tuple3<Op, Integer, Integer>>> steps() {
        Arbitrary<Tuple.Tuple3<Op, Integer, Integer>> step = net.jqwik.api.Combinators.combine(
                Arbitraries.of(Op.class), Arbitraries.integers().between(0, 4), Arbitraries.integers().between(1, 7))
                .as(Tuple::of);
        return step.list().ofMinSize(1).ofMaxSize(60);
    }

    @Property(tries = 300)
    void anyHistoryKeepsTheInvariants(@ForAll("steps") List<Tuple.Tuple3<Op, Integer, Integer>> history) {
        int capacity = 12;
        AtomicLong now = new AtomicLong();
        BlockAllocator blocks = new BlockAllocator("decode", capacity, now::get);
        // the model: each owner's blocks, whether its peer released, and its lease deadline once ended
        Map<String, List<Long>> held = new HashMap<>();
        Map<String, Long> leaseDeadline = new HashMap<>();
        Set<String> released = new HashSet<>();
        for (Tuple.Tuple3<Op, Integer, Integer> step : history) {
            String owner = "o" + step.get2();
            switch (step.get1()) {
                case ALLOCATE -> {
                    int free = capacity - blocks.held();
                    if (held.containsKey(owner)) {
                        assertThatThrownBy(() -> blocks.allocate(owner, step.get3()))
                                .isInstanceOf(IllegalStateException.class);
                    } else if (step.get3() > free) {
                        assertThatThrownBy(() -> blocks.allocate(owner, step.get3()))
                                .isInstanceOf(BlockAllocator.OutOfBlocksException.class);
                        assertThat(blocks.held()).isEqualTo(capacity - free);
                    } else {
                        List<Long> got = blocks.allocate(owner, step.get3());
                        for (List<Long> other : held.values()) {
                            assertThat(got).as("never a block another owner holds, quarantined or not")
                                    .doesNotContainAnyElementsOf(other);
                        }
                        held.put(owner, got);
                        released.remove(owner);
                        leaseDeadline.remove(owner);
                    }
                }
                case WRITING -> blocks.writing(owner);
                case END -> {
                    boolean running = held.containsKey(owner) && !leaseDeadline.containsKey(owner);
                    State after = blocks.end(owner, LEASE);
                    if (running && released.contains(owner)) {
                        assertThat(after).isEqualTo(State.FREE);
                        held.remove(owner);
                    } else if (running) {
                        assertThat(after).isEqualTo(State.QUARANTINED);
                        leaseDeadline.put(owner, now.get() + LEASE.toNanos());
                    }
                }
                case RELEASE -> {
                    assertThat(blocks.release(owner)).isEqualTo(held.containsKey(owner));
                    if (leaseDeadline.containsKey(owner)) {
                        held.remove(owner);
                        leaseDeadline.remove(owner);
                    } else if (held.containsKey(owner)) {
                        released.add(owner);
                    }
                }
                case FREE -> {
                    assertThat(blocks.free(owner)).isEqualTo(held.containsKey(owner) ? held.get(owner).size() : 0);
                    held.remove(owner);
                    leaseDeadline.remove(owner);
                }
                case ADVANCE -> now.addAndGet(Duration.ofSeconds(step.get3() * 10L).toNanos());
                case REAP -> {
                    List<String> due = new ArrayList<>();
                    leaseDeadline.forEach((o, d) -> {
                        if (now.get() >= d) {
                            due.add(o);
                        }
                    });
                    assertThat(blocks.reclaimExpired()).containsExactlyInAnyOrderElementsOf(due);
                    due.forEach(o -> {
                        held.remove(o);
                        leaseDeadline.remove(o);
                    });
                }
            }
            checkInvariants(blocks, capacity, held, leaseDeadline);
        }
    }

    private static void checkInvariants(BlockAllocator blocks, int capacity, Map<String, List<Long>> held,
            Map<String, Long> leaseDeadline) {
        BlockAllocator.Snapshot snap = blocks.snapshot();
        assertThat(snap.blocks().values().stream().mapToInt(Integer::intValue).sum()).isEqualTo(capacity);
        int heldCount = 0;
        for (Map.Entry<String, List<Long>> e : held.entrySet()) {
            State state = blocks.stateOf(e.getKey());
            assertThat(state).isNotEqualTo(State.FREE);
            assertThat(state == State.QUARANTINED).isEqualTo(leaseDeadline.containsKey(e.getKey()));
            for (long b : e.getValue()) {
                assertThat(blocks.stateOfBlock((int) b)).isEqualTo(state);
                assertThat(blocks.ownerOfBlock((int) b)).isEqualTo(e.getKey());
            }
            heldCount += e.getValue().size();
        }
        assertThat(blocks.held()).isEqualTo(heldCount);
        for (int b = 0; b < capacity; b++) {
            assertThat(blocks.stateOfBlock(b) == State.FREE).isEqualTo(blocks.ownerOfBlock(b) == null);
        }
    }
}
