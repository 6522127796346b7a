package dev.kvflux.bindings.gpu;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.bindings.EventState;
import dev.kvflux.bindings.LayerEvent;
import dev.kvflux.bindings.StatusCode;
import java.util.ArrayList;
import java.util.Arrays;
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
        assertThat(queries.sum()).as("the newest event, then its own").isEqualTo(2);
        passed = 3;
        assertThat(statuses.get(1).code()).as("answered from the fresh not-ready").isEqualTo(StatusCode.IN_PROGRESS);
        assertThat(queries.sum()).isEqualTo(2);
        now.addAndGet(StreamProgress.FRESH_NANOS);
        assertThat(statuses.get(1).code()).isEqualTo(StatusCode.SUCCESS);
        assertThat(statuses.get(0).code()).isEqualTo(StatusCode.SUCCESS);
        assertThat(statuses.get(2).code()).isEqualTo(StatusCode.SUCCESS);
        assertThat(queries.sum()).as("the newest event, seen ready, settled all three").isEqualTo(3);
    }

    @Test
    void aNotReadySeenOnALaterEventSaysNothingAboutAnEarlierOne() {
        List<GpuTransferStatus> statuses = post(3, stream);
        passed = 1;
        assertThat(statuses.get(2).code()).isEqualTo(StatusCode.IN_PROGRESS);
        assertThat(statuses.get(0).code()).isEqualTo(StatusCode.SUCCESS);
        assertThat(queries.sum()).as("the newest; then, for the first, the one halfway, then its own").isEqualTo(3);
    }

    @Test
    void theNewestEventSeenReadySettlesAnEarlierStatusAndEveryOneBetweenWithOneQuery() {
        List<GpuTransferStatus> statuses = post(5, stream);
        passed = 5;
        for (GpuTransferStatus status : statuses) {
            assertThat(status.code()).isEqualTo(StatusCode.SUCCESS);
        }
        assertThat(queries.sum()).isEqualTo(1);
    }

    @Test
    void aStatusQueryMakesAtMostTwoNativeQueries() {
        List<GpuTransferStatus> statuses = post(40, stream);
        for (int p = 0; p <= 40; p += 3) {
            passed = p;
            now.addAndGet(StreamProgress.FRESH_NANOS);
            for (GpuTransferStatus status : statuses) {
                long before = queries.sum();
                StatusCode code = status.code();
                assertThat(queries.sum() - before).isLessThanOrEqualTo(2);
                assertThat(code).as("status %s at %s passed", status.transferUid(), p)
                        .isEqualTo(status.transferUid() < p ? StatusCode.SUCCESS : StatusCode.IN_PROGRESS);
            }
        }
    }

    @Test
    void postingPollsOnlyWithoutSharedProgressAsMoriDoes() {
        GpuTransferStatus shared = post(1, stream).get(0);
        shared.afterPosting();
        assertThat(queries.sum()).as("shared: no query at posting").isZero();
        GpuTransferStatus alone = post(1, new StreamProgress(queries, now::get, false)).get(0);
        alone.afterPosting();
        assertThat(queries.sum()).as("unshared: MoRI's poll right after posting").isEqualTo(1);
        assertThat(shared.code()).isEqualTo(StatusCode.IN_PROGRESS);
        assertThat(alone.code()).isEqualTo(StatusCode.IN_PROGRESS);
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
        statuses.get(1).hostFunctionRan(System.nanoTime());
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
        Arrays.fill(settledAt, -1);
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

    /**
     * The GPU reproducer's shape: requests one after another, 118 layers each posted round-robin on the
     * streams, the GPU completing layers in posting order 7 behind the posting; the wait then polls every
     * in-flight status earliest first at once and every 10 ms, finding 8, 3, then 0 layers still in flight.
     * Returns {native queries, per status the poll (0, 1, 2) that saw it settle, concatenated}.
     */
    private long[] reproducer(int streams, boolean share) {
        int layers = 118;
        int requests = 4;
        List<StreamProgress> progress = new ArrayList<>();
        for (int s = 0; s < streams; s++) {
            progress.add(new StreamProgress(queries, now::get, share));
        }
        int[] done = new int[1];
        LongAdder counted = new LongAdder();
        List<Long> settled = new ArrayList<>();
        int posted = 0;
        for (int r = 0; r < requests; r++) {
            List<GpuTransferStatus> request = new ArrayList<>();
            for (int layer = 0; layer < layers; layer++) {
                int global = posted++;
                done[0] = Math.max(0, global - 7);
                LayerEvent event = () -> {
                    counted.increment();
                    return global < done[0] ? EventState.READY : EventState.NOT_READY;
                };
                StreamProgress onStream = progress.get(global % streams);
                GpuTransferStatus status = new GpuTransferStatus(global);
                status.posted(event, e -> { }, () -> { }, onStream, onStream.nextSequence());
                status.afterPosting();
                request.add(status);
                now.addAndGet(2_000_000);
            }
            long[] settledAt = new long[layers];
            Arrays.fill(settledAt, -1);
            int[] inFlightAtPoll = {8, 3, 0};
            for (int poll = 0; poll < inFlightAtPoll.length; poll++) {
                done[0] = posted - inFlightAtPoll[poll];
                for (int i = 0; i < layers; i++) {
                    now.addAndGet(1_000);
                    if (settledAt[i] < 0 && request.get(i).code() == StatusCode.SUCCESS) {
                        settledAt[i] = poll;
                    }
                }
                now.addAndGet(10_000_000);
            }
            for (long at : settledAt) {
                settled.add(at);
            }
        }
        long[] out = new long[1 + settled.size()];
        out[0] = counted.sum();
        for (int i = 0; i < settled.size(); i++) {
            out[i + 1] = settled.get(i);
        }
        return out;
    }

    private static void assertSettledAtTheSamePolls(long[] shared, long[] alone) {
        assertThat(Arrays.copyOfRange(shared, 1, shared.length)).as("every status settles at the same poll")
                .containsExactly(Arrays.copyOfRange(alone, 1, alone.length));
    }

    @Test
    void inTheReproducersShapeSharedProgressTakesAtLeastThreeTimesFewerQueriesOnFourStreams() {
        long[] shared = reproducer(4, true);
        long[] alone = reproducer(4, false);
        assertSettledAtTheSamePolls(shared, alone);
        assertThat(alone[0]).isGreaterThanOrEqualTo(3 * shared[0]);
    }

    /**
     * Per request, unshared: 118 queries at posting and 118 + 8 + 3 in the wait (2.09 a status, as measured
     * on the H200s). Shared: none at posting; at the first poll one query for each of the 46 streams whose
     * newest event is done, two (newest not ready, own ready) for each of the 8 whose newest is in flight,
     * one for each of the 10 streams with one layer; then one per in-flight newest: 8, then 3. So 83.
     */
    @Test
    void inTheReproducersShapeOn64StreamsAStreamCostsOneQueryPerPollPlusOneWhileItsNewestIsInFlight() {
        long[] shared = reproducer(64, true);
        long[] alone = reproducer(64, false);
        assertSettledAtTheSamePolls(shared, alone);
        assertThat(alone[0]).isEqualTo(4 * (118 + 118 + 8 + 3));
        assertThat(shared[0]).isEqualTo(4 * (46 + 2 * 8 + 10 + 8 + 3));
    }
}
