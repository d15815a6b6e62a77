"""Offset and sequence-range arithmetic of the jetstream data source (no Spark, no server)."""
from __future__ import annotations

import itertools

import pytest

from pyspark_jetstream.offsets import (
    EARLIEST, LATEST, DataLoss, OffsetError, StreamBounds, check_start, decode_offset, encode_offset, limit_end,
    parse_offset_spec, resolve_end, resolve_start, split_range,
)
from pyspark_jetstream.options import ReadOptions, WriteOptions


@pytest.mark.parametrize("start,end", [(1, 1), (1, 2), (1, 11), (5, 105), (7, 8), (100, 1100), (3, 10)])
@pytest.mark.parametrize("min_parts,max_per", [(1, 0), (1, 1), (3, 0), (4, 7), (1, 1000), (50, 0), (2, 3)])
def test_split_range_covers_exactly_without_overlap(start, end, min_parts, max_per):
    pieces = split_range(start, end, min_parts, max_per)
    n = end - start
    if n <= 0:
        assert pieces == []
        return
    # contiguous, in order, covering [start, end) exactly: every sequence in exactly one piece
    assert pieces[0][0] == start and pieces[-1][1] == end
    for (s1, e1), (s2, e2) in itertools.pairwise(pieces):
        assert e1 == s2
    assert all(s < e for s, e in pieces)
    covered = [q for s, e in pieces for q in range(s, e)]
    assert covered == list(range(start, end))
    # as many pieces as asked for when there are enough sequences, none over the size limit, sizes within 1
    assert len(pieces) >= min(min_parts, n)
    if max_per:
        assert max(e - s for s, e in pieces) <= max_per
        assert len(pieces) == max(min(min_parts, n), -(-n // max_per))
    sizes = [e - s for s, e in pieces]
    assert max(sizes) - min(sizes) <= 1


def test_split_range_empty_and_reversed():
    assert split_range(5, 5) == []
    assert split_range(9, 5, 3, 2) == []


@pytest.mark.parametrize("state,start,end", [
    ({"first_seq": 0, "last_seq": 0}, 1, 1),        # never held a message
    ({"first_seq": 1, "last_seq": 10}, 1, 11),
    ({"first_seq": 11, "last_seq": 10}, 11, 11),    # purged: nats-server reports last+1 / last
    ({"first_seq": 40, "last_seq": 90}, 40, 91),
])
def test_stream_bounds(state, start, end):
    b = StreamBounds.from_state(state)
    assert (b.start, b.end) == (start, end)
    assert resolve_start(EARLIEST, b) == start
    assert resolve_start(LATEST, b) == end
    assert resolve_end(LATEST, b) == end


def test_resolve_numeric_offsets():
    b = StreamBounds(5, 20)
    assert resolve_start(7, b) == 7
    assert resolve_end(12, b) == 12
    assert resolve_end(500, b) == 21  # never past what is stored now
    assert resolve_start(3, b) == 3  # below first_seq: check_start decides


def test_parse_offset_spec():
    assert parse_offset_spec("earliest", "x") == EARLIEST
    assert parse_offset_spec(" LATEST ", "x") == LATEST
    assert parse_offset_spec("42", "x") == 42
    assert parse_offset_spec(7, "x") == 7
    for bad in ("0", "-3", "soon", ""):
        with pytest.raises(OffsetError):
            parse_offset_spec(bad, "startingOffsets")
    with pytest.raises(OffsetError):
        parse_offset_spec("earliest", "endingOffsets", allow_earliest=False)


def test_check_start_data_loss():
    b = StreamBounds(31, 40)
    assert check_start("S", 31, b, True) == 31
    assert check_start("S", 35, b, True) == 35
    with pytest.raises(DataLoss) as e:
        check_start("S", 11, b, True)
    assert (e.value.start, e.value.first_seq) == (11, 31)
    assert "11..30" in str(e.value)
    assert check_start("S", 11, b, False) == 31
    # a range that ends before first_seq is skipped entirely when not failing
    assert check_start("S", 11, b, False, end=20) == 20
    # an empty stream that never held a message lost nothing
    assert check_start("S", 1, StreamBounds(0, 0), True) == 1
    # everything purged that was read already: no loss
    assert check_start("S", 41, StreamBounds(41, 40), True) == 41
    with pytest.raises(DataLoss):
        check_start("S", 30, StreamBounds(41, 40), True)


def test_limit_end():
    assert limit_end(10, 100, None) == 100
    assert limit_end(10, 100, 25) == 35
    assert limit_end(10, 20, 25) == 20
    assert limit_end(10, 10, 25) == 10
    assert limit_end(10, 5, None) == 10  # never moves backwards


def test_limit_end_walks_the_whole_range_in_steps():
    start, available, step = 1, 101, 7
    ends = []
    while True:
        end = limit_end(start, available, step)
        if end == start:
            break
        ends.append(end)
        start = end
    assert ends[-1] == 101 and all(b - a <= 7 for a, b in itertools.pairwise([1] + ends))


def test_offsets_roundtrip_and_stream_check():
    off = encode_offset("ORDERS", 17)
    assert off == {"stream": "ORDERS", "seq": 17}
    assert decode_offset(off, "ORDERS") == 17
    assert decode_offset('{"stream": "ORDERS", "seq": 17}', "ORDERS") == 17
    with pytest.raises(OffsetError, match="ORDERS"):
        decode_offset(off, "OTHER")
    for bad in ({"seq": 0}, {"stream": "ORDERS"}, [], {"seq": "3"}):
        with pytest.raises(OffsetError):
            decode_offset(bad, "ORDERS")


def test_read_options():
    o = ReadOptions.parse({"stream": "ORDERS", "SERVERS": "nats://h:1", "startingOffsets": "5",
                           "filterSubjects": "a.*, b.>", "minPartitions": "3", "maxSeqsPerPartition": "10",
                           "failOnDataLoss": "false", "user": "u", "password": "p"})
    assert o.stream == "ORDERS" and o.connect.servers == "nats://h:1"
    assert o.starting == 5 and o.ending == LATEST
    assert o.filter_subjects == ("a.*", "b.>")
    assert (o.min_partitions, o.max_seqs_per_partition, o.fail_on_data_loss) == (3, 10, False)
    assert (o.connect.user, o.connect.password) == ("u", "p")
    # Kafka's defaults: batch reads start at earliest, streaming reads at latest
    assert ReadOptions.parse({"stream": "S"}).starting == EARLIEST
    s = ReadOptions.parse({"stream": "S", "maxOffsetsPerTrigger": "100"}, streaming=True)
    assert s.starting == LATEST and s.max_offsets_per_trigger == 100
    for bad in ({}, {"stream": "S", "minPartitions": "0"}, {"stream": "S", "failOnDataLoss": "maybe"},
                {"stream": "S", "readMethod": "direct", "filterSubjects": "a,b"}, {"stream": "S", "readMethod": "x"}):
        with pytest.raises(ValueError):
            ReadOptions.parse(bad)
    with pytest.raises(ValueError):
        ReadOptions.parse({"stream": "S", "endingOffsets": "10"}, streaming=True)


def test_write_options():
    w = WriteOptions.parse({"servers": "nats://x:4222", "subject": "out", "writeId": "job-7", "maxInFlight": "64"})
    assert (w.subject, w.write_id, w.max_in_flight, w.stream) == ("out", "job-7", 64, None)


# --- issue #18: re-created streams, option checking ------------------------------------------------------------

from pyspark_jetstream.offsets import Position, StreamReset, check_position, decode_position  # noqa: E402
from pyspark_jetstream.options import check_option_names, validate  # noqa: E402

OLD, NEW = "2026-01-01T00:00:00.1Z", "2026-01-02T00:00:00.2Z"


def test_offsets_carry_the_stream_incarnation():
    off = encode_offset("S", 1001, OLD)
    assert off == {"stream": "S", "seq": 1001, "created": OLD}
    assert decode_position(off, "S") == Position(1001, OLD)
    assert decode_position(encode_offset("S", 7, NEW, reset=3), "S") == Position(7, NEW, 3)
    assert decode_position({"stream": "S", "seq": 5}, "S") == Position(5)  # a checkpoint from before this change
    for bad in ({"seq": 5, "created": 7}, {"seq": 5, "reset": 6}, {"seq": 5, "reset": "1"}):
        with pytest.raises(OffsetError):
            decode_position(bad, "S")


def test_recreated_stream_is_data_loss():
    # 1,000 read from the old stream; the stream re-created with 600: the checkpoint is past its end ...
    new = StreamBounds(1, 600, NEW)
    with pytest.raises(StreamReset, match="re-created"):
        check_position("S", Position(1001, OLD), new, True)
    with pytest.raises(StreamReset, match="ends at 600"):
        check_position("S", Position(1001), new, True)  # an old checkpoint without the creation time
    # ... and after 900 more it is not, yet the new 1..1000 were never read: the creation time tells
    with pytest.raises(StreamReset, match="re-created"):
        check_position("S", Position(1001, OLD), StreamBounds(1, 1500, NEW), True)
    # failOnDataLoss=false: restart at the new stream's first message
    assert check_position("S", Position(1001, OLD), StreamBounds(1, 1500, NEW), False) == (1, True)
    assert check_position("S", Position(1001), new, False) == (1, True)
    assert check_position("S", Position(9, OLD), StreamBounds(0, 0, NEW), False) == (1, True)
    # the same incarnation: the ordinary checks
    assert check_position("S", Position(1001, NEW), StreamBounds(1, 1500, NEW), True) == (1001, False)
    assert check_position("S", Position(601, NEW), new, True) == (601, False)  # exactly at the end: nothing new
    assert check_position("S", Position(1, NEW), StreamBounds(0, 0, NEW), True) == (1, False)
    with pytest.raises(DataLoss):
        check_position("S", Position(3, NEW), StreamBounds(10, 20, NEW), True)


def test_unknown_option_names_it_and_close_matches():
    with pytest.raises(ValueError) as e:
        ReadOptions.parse({"stream": "S", "filterSubject": "a.>"})
    assert "'filterSubject'" in str(e.value) and "did you mean 'filterSubjects'" in str(e.value)
    with pytest.raises(ValueError, match="'maxInFlight'"):
        WriteOptions.parse({"maxInFlite": "5"})
    with pytest.raises(ValueError, match="unknown option 'bogus'"):
        validate({"bogus": "1"})
    with pytest.raises(ValueError, match="takes no path"):
        validate({"path": "/x"})
    # an option of the other side is refused too, not ignored
    with pytest.raises(ValueError, match="writeId does not apply to a batch read"):
        ReadOptions.parse({"stream": "S", "writeId": "w"})
    with pytest.raises(ValueError, match="maxOffsetsPerTrigger does not apply to a batch read"):
        ReadOptions.parse({"stream": "S", "maxOffsetsPerTrigger": "5"})
    with pytest.raises(ValueError, match="endingOffsets is for batch queries only"):
        ReadOptions.parse({"stream": "S", "endingOffsets": "5"}, streaming=True)
    with pytest.raises(ValueError, match="checkpointLocation does not apply to a batch write"):
        WriteOptions.parse({"checkpointLocation": "/tmp/c"})
    # Spark adds these to a streaming sink's options itself; names are case-insensitive
    WriteOptions.parse({"checkpointlocation": "/tmp/c", "queryname": "q", "SUBJECT": "x"}, streaming=True)
    check_option_names({"FILTERSUBJECTS": "a", "TimeOut": "3"}, "read")


def test_option_values_name_the_option():
    for value in ("abc", "0", "-1", "nan", "inf"):
        with pytest.raises(ValueError, match="option timeout"):
            validate({"timeout": value})
    assert ReadOptions.parse({"stream": "S", "timeout": "2.5"}).connect.timeout == 2.5
    with pytest.raises(ValueError, match="startingOffsets"):
        validate({"startingOffsets": "soon"})
    with pytest.raises(ValueError, match="fetchBatch"):
        validate({"fetchBatch": "x"})
    # Kafka: a batch query cannot start at latest (it would always read nothing)
    with pytest.raises(OffsetError, match="streaming queries only"):
        ReadOptions.parse({"stream": "S", "startingOffsets": "latest"})
    assert ReadOptions.parse({"stream": "S", "startingOffsets": "latest"}, streaming=True).starting == LATEST
