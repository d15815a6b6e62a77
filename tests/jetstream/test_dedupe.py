"""server/jetstream/dedupe.py: the Nats-Msg-Id window, without a server (time is a variable)."""
from __future__ import annotations

from skiff.server.jetstream.dedupe import DedupeWindow

W = 100  # ns


def test_an_id_is_a_duplicate_inside_the_window_only():
    now = [1000]
    d = DedupeWindow(W, lambda: now[0])
    d.store("a", 1, 1000)
    assert d.check("a") == 1 and d.check("b") == 0
    now[0] = 1099
    assert d.check("a") == 1
    now[0] = 1100  # now - ts == window: gone (nats-server purgeMsgIds)
    assert d.check("a") == 0
    assert len(d) == 0


def test_an_id_stored_again_outlives_its_first_entry():
    now = [1000]
    d = DedupeWindow(W, lambda: now[0])
    d.store("a", 1, 1000)
    d.store("b", 2, 1050)
    now[0] = 1120
    d.store("a", 3, 1120)  # the first "a" expired and is pruned here, the new one stays
    assert d.check("a") == 3 and d.check("b") == 2
    now[0] = 1160  # "b" expires; pruning it leaves "a"
    d.store("c", 4, 1160)
    assert (d.check("a"), d.check("b"), d.check("c")) == (3, 0, 4)
    assert len(d) == 2


def test_ids_loaded_after_a_restart_go_before_the_newer_ones():
    now = [1000]
    d = DedupeWindow(W, lambda: now[0])
    d.store("a", 5, 1000)  # stored since the restart
    d.set_loader(lambda: iter([("a", 1, 950), ("b", 2, 960)]))  # what the store held in the window
    assert d.check("a") == 5 and d.check("b") == 2
    now[0] = 1070  # the loaded entries expire, the newer "a" does not
    assert (d.check("a"), d.check("b")) == (5, 0)
    assert len(d) == 1


def test_forget_seqs_and_a_zero_window():
    now = [1000]
    d = DedupeWindow(W, lambda: now[0])
    d.store("a", 1, 1000)
    d.store("b", 2, 1000)
    d.forget_seqs({2})
    assert (d.check("a"), d.check("b")) == (1, 0)
    d.set_window(0)
    d.store("c", 3, 1000)
    assert (d.check("a"), d.check("c")) == (0, 0)
