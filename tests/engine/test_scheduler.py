"""Scheduling policy: interactive first, bounded queue, holes admitted as slots free up."""

from concurrent.futures import Future

import pytest

from dllm_engine.protocol import EngineBusy, Hole, InfillRequest
from dllm_engine.scheduler import INTERACTIVE_EXTRA_SLOTS, RequestState, Scheduler


def state(priority, holes=1):
    return RequestState(request=InfillRequest(holes=[Hole(prefix="x")] * holes, priority=priority),
                        future=Future(), on_event=None)


class Running:
    """An admitted hole, as the scheduler sees one (scheduler.ActiveHole's state)."""

    def __init__(self, priority):
        self.state = state(priority)


def test_interactive_jumps_the_batch_queue_and_batch_work_waits_for_it():
    """A batch hole's admission encodes its context in one forward nothing interrupts: beside a
    keystroke's request it held that request's passes (0.9 s on 2 cores), so it waits."""
    s = Scheduler(max_batch=2, max_queue=10)
    batch, keystroke = state("batch", holes=3), state("interactive")
    s.add(batch)
    s.add(keystroke)
    assert s.next_admissions() == [(keystroke, 0)]
    s.active = [Running("interactive")]
    assert s.next_admissions() == []
    s.active = [Running("batch")]  # a batch hole running does not hold back another
    assert s.next_admissions() == [(batch, 0)]
    s.active = []
    assert s.next_admissions() == [(batch, 1), (batch, 2)]


def test_interactive_may_exceed_a_full_batch():
    s = Scheduler(max_batch=1, max_queue=10)
    s.active = [object()]  # the batch slots are taken by a refactor
    s.add(state("batch"))
    s.add(state("interactive"))
    picked = s.next_admissions()
    assert len(picked) == 1 and picked[0][0].request.priority == "interactive"
    assert INTERACTIVE_EXTRA_SLOTS >= 1


def test_queue_is_bounded():
    s = Scheduler(max_batch=1, max_queue=2)
    s.add(state("batch"))
    s.add(state("batch"))
    with pytest.raises(EngineBusy):
        s.add(state("interactive"))


def test_a_many_hole_request_is_admitted_in_parts():
    s = Scheduler(max_batch=2, max_queue=10)
    big = state("batch", holes=5)
    s.add(big)
    assert [h for _, h in s.next_admissions()] == [0, 1]
    s.active = [object(), object()]
    assert s.next_admissions() == []
    s.active = []
    assert [h for _, h in s.next_admissions()] == [2, 3]
    assert s.queue_depth == 1
