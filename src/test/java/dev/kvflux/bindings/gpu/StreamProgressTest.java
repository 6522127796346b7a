package dev.kvflux.bindings.gpu;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.bindings.EventState;
import dev.kvflux.bindings.LayerEvent;
import dev.kvflux.bindings.StatusCode;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import org.junit.jupiter.api.Test;

/** Statuses on one stream share what their queries saw, over fake events that a fake stream completes in order. */
class StreamProgressTest {
    private final AtomicLong now = new AtomicLong(1_000_000);
    private final LongAdder queries = new LongAdder();
    private final StreamProgress stream = new StreamProgress(queries, now::get);
    /** How many events, in record order, the fake stream has passed. */
    private int passed;

    /** An event on the fake stream: ready once the stream has passed it. */
    private final class OrderedEvent implements LayerEvent {
        final int position;

        OrderedEvent(int position) {
            this.position = position;
        }

        @Override
        public EventState query() {
            return position < passed ? EventState.READY : EventState.NOT_READY;
        }
    }

    private List<GpuTransferStatus> post(int count, StreamProgress progress) {
        List<GpuTransferStatus> statuses = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            OrderedEvent event = new OrderedEvent(i);
            GpuTransferStatus status = new GpuTransferStatus(i);
            if (progress != null) {
                status.posted(event, e -> { }, () -> { }, progress, progress.nextSequence());
            } else {
                status.posted(event, e -> { }, () -> { });
            }
            statuses.add(status);
        }
        return statuses;
    }

    @Test
    void aLaterEventSeenReadySettlesEveryEarlierStatusWithoutAQuery() {
        List<GpuTransferStatus> statuses = post(3, stream);
        passed = 3;
        assertThat(statuses.get(2).code()).isEqualTo(StatusCode.SUCCESS);
        assertThat(statuses.get(0).code()).isEqualTo(StatusCode.SUCCESS);
        assertThat(statuses.get(1).code()).isEqualTo(StatusCode.SUCCESS);
        assertThat(queries.sum()).isEqualTo(1);
    }

    @Test
    void anEarlierEventJustSeenNotReadyAnswersForLaterOnesUntilItIsNoLongerFresh() {
        List<GpuTransferStatus> statuses = post(3, stream);
        assertThat(statuses.get(0).code()).isEqualTo(StatusCode.IN_PROGRESS);
        passed = 3;
        assertThat(statuses.get(1).code()).as("answered from the fresh not-ready").isEqualTo(StatusCode.IN_PROGRESS);
        assertThat(queries.sum()).isEqualTo(1);
        now.addAndGet(StreamProgress.FRESH_NANOS);
        assertThat(statuses.get(1).code()).isEqualTo(StatusCode.SUCCESS);
        assertThat(statuses.get(0).code()).isEqualTo(StatusCode.SUCCESS);
        assertThat(queries.sum()).isEqualTo(2);
    }

    @Test
    void aNotReadySeenOnALaterEventSaysNothingAboutAnEarlierOne() {
        List<GpuTransferStatus> statuses = post(3, stream);
        passed = 1;
        assertThat(statuses.get(2).code()).isEqualTo(StatusCode.IN_PROGRESS);
        assertThat(statuses.get(0).code()).isEqualTo(StatusCode.SUCCESS);
        assertThat(queries.sum()).isEqualTo(2);
    }

    @Test
    void unsharedProgressQueriesEveryInFlightStatusAndCountsEachQuery() {
        StreamProgress unshared = new StreamProgress(queries, now::get, false);
        List<GpuTransferStatus> statuses = post(3, unshared);
        assertThat(statuses.get(0).code()).isEqualTo(StatusCode.IN_PROGRESS);
        assertThat(statuses.get(2).code()).as("no fresh not-ready answers for it").isEqualTo(StatusCode.IN_PROGRESS);
        assertThat(queries.sum()).isEqualTo(2);
        passed = 3;
        assertThat(statuses.get(2).code()).isEqualTo(StatusCode.SUCCESS);
        assertThat(statuses.get(0).code()).as("a later ready does not settle it without a query")
                .isEqualTo(StatusCode.SUCCESS);
        assertThat(statuses.get(1).code()).isEqualTo(StatusCode.SUCCESS);
        assertThat(queries.sum()).isEqualTo(5);
    }

    @Test
    void theHostFunctionBehindABatchSettlesItEvenWhileANotReadyIsFresh() {
        List<GpuTransferStatus> statuses = post(2, stream);
        assertThat(statuses.get(0).code()).isEqualTo(StatusCode.IN_PROGRESS);
        passed = 2;
        statuses.get(1).onPushed();
        assertThat(statuses.get(1).code()).isEqualTo(StatusCode.SUCCESS);
        assertThat(statuses.get(0).code()).isEqualTo(StatusCode.SUCCESS);
    }

    /**
     * 10 requests x 118 statuses on 4 streams, polled every 10 ms tick (each request's statuses in turn,
     * requests one after another, 10 us of clock apart), while each stream passes 3 events a tick: the
     * shared progress needs at least 3x fewer native queries, and every status settles at the same tick;
     * the engine's count ({@code queries}) is the events' own count of queries, shared or not.
     */
    @Test
    void pollingManyStatusesOnFewStreamsTakesAtLeastThreeTimesFewerQueries() {
        int[] settledTickShared = pollToTheEnd(true);
        long shared = queries.sum();
        assertThat(shared).isEqualTo(polledQueries);
        queries.reset();
        int[] settledTickAlone = pollToTheEnd(false);
        long alone = queries.sum();
        assertThat(alone).isEqualTo(polledQueries);
        assertThat(settledTickShared).containsExactly(settledTickAlone);
        assertThat(alone).isGreaterThanOrEqualTo(3 * shared);
    }

    private long polledQueries;

    /** Per status, the tick at which a poll saw it settle. */
    private int[] pollToTheEnd(boolean share) {
        int streams = 4;
        int requests = 10;
        int per = 118;
        List<List<GpuTransferStatus>> onStream = new ArrayList<>();
        int[] streamPassed = new int[streams];
        List<GpuTransferStatus> all = new ArrayList<>();
        List<int[]> where = new ArrayList<>();
        List<StreamProgress> progress = new ArrayList<>();
        for (int s = 0; s < streams; s++) {
            onStream.add(new ArrayList<>());
            progress.add(new StreamProgress(queries, now::get, share));
        }
        LongAdder counted = new LongAdder();
        for (int i = 0; i < requests * per; i++) {
            int s = i % streams;
            int position = onStream.get(s).size();
            LayerEvent event = () -> {
                counted.increment();
                return position < streamPassed[s] ? EventState.READY : EventState.NOT_READY;
            };
            GpuTransferStatus status = new GpuTransferStatus(i);
            status.posted(event, e -> { }, () -> { }, progress.get(s), progress.get(s).nextSequence());
            onStream.get(s).add(status);
            all.add(status);
            where.add(new int[] {s, position});
        }
        int[] settledAt = new int[all.size()];
        java.util.Arrays.fill(settledAt, -1);
        for (int tick = 0; tick < 200; tick++) {
            for (int s = 0; s < streams; s++) {
                streamPassed[s] += 3;
            }
            for (int i = 0; i < all.size(); i++) {
                if (i % per == 0) {
                    now.addAndGet(10_000);
                }
                if (settledAt[i] < 0 && all.get(i).code() == StatusCode.SUCCESS) {
                    settledAt[i] = tick;
                }
            }
            now.addAndGet(10_000_000);
        }
        polledQueries = counted.sum();
        return settledAt;
    }
}
